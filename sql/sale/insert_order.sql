INSERT INTO orders (ticket_type_id, email, quantity, idempotency_key, unit_price_minor, currency,
                    cancel_secret_hash, buyer_key)
SELECT t.id, $2, $3, $4, t.price_minor, t.currency, $5, $6 FROM ticket_types t WHERE t.id = $1
ON CONFLICT ON CONSTRAINT orders_buyer_idempotency_key DO NOTHING
RETURNING id, ticket_type_id, email, quantity, status AS "status: OrderStatus",
          unit_price_minor, currency, created_at
