SELECT o.id, o.ticket_type_id, o.email, o.quantity,
       CASE WHEN o.cancel_reason = 'expired' THEN 'expired' ELSE o.status END AS "status!: OrderStatus",
       o.unit_price_minor, o.currency, o.created_at, o.idempotency_key, o.hold_expires_at
FROM orders o
JOIN unnest($1::text[], $2::text[]) AS k (email, idempotency_key)
  ON o.email = k.email AND o.idempotency_key = k.idempotency_key
