SELECT id, ticket_type_id, email, quantity, status AS "status: OrderStatus",
       unit_price_minor, currency, created_at, hold_expires_at
FROM orders WHERE id = $1 OR (email = $2 AND idempotency_key = $3)
