UPDATE orders o SET status = 'cancelled', cancelled_at = now()
FROM ticket_types t
WHERE o.id = $1 AND o.status = 'confirmed' AND o.cancel_secret_hash = $2
  AND t.id = o.ticket_type_id AND t.event_starts_at > $3
RETURNING o.ticket_type_id, COALESCE(o.buyer_key, o.email) AS "buyer_key!", o.quantity
