UPDATE orders o SET status = 'cancelled', cancelled_at = now()
FROM ticket_types t, events e
WHERE o.id = $1 AND o.status = 'confirmed'
  AND t.id = o.ticket_type_id AND e.id = t.event_id AND e.organizer_id = $2
  AND t.event_starts_at > $3
RETURNING o.ticket_type_id, COALESCE(o.buyer_key, o.email) AS "buyer_key!", o.quantity
