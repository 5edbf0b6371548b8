WITH new_order AS (
    INSERT INTO orders (ticket_type_id, email, quantity, idempotency_key, unit_price_minor, currency,
                        cancel_secret_hash, buyer_key, queue_entry_id)
    SELECT t.id, $2, $3, $4, t.price_minor, t.currency, $5, $6, $7 FROM ticket_types t WHERE t.id = $1
    ON CONFLICT ON CONSTRAINT orders_buyer_idempotency_key DO NOTHING
    RETURNING id, ticket_type_id, email, quantity, status, unit_price_minor, currency, created_at
), outboxed AS (
    INSERT INTO outbox (kind, event_id, order_id, ticket_type_id, sequence, payload)
    SELECT 'order.created', t.event_id, n.id, n.ticket_type_id, 1,
           jsonb_build_object('order_id', n.id, 'event_id', t.event_id,
                              'ticket_type_id', n.ticket_type_id, 'email', n.email,
                              'quantity', n.quantity, 'status', n.status,
                              'unit_price_minor', n.unit_price_minor, 'currency', n.currency,
                              'created_at', n.created_at)
    FROM new_order n JOIN ticket_types t ON t.id = n.ticket_type_id
)
SELECT id, ticket_type_id, email, quantity, status AS "status: OrderStatus",
       unit_price_minor, currency, created_at
FROM new_order
