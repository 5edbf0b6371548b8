-- The bare-SQL ceiling of the sale (issue 38), run by scripts/bench-ceiling
-- with pgbench from one client: each transaction writes exactly the rows
-- the engine's batch writes for :batch orders of one ticket each, by new
-- buyers (sql/sale/batch_write.sql): the orders, their tickets, both
-- holdings upserts, the outbox rows and the stock, under the ticket type's
-- row lock, durably (synchronous_commit on). What it leaves out is the
-- engine's own work: its reads (the event, existing orders, holdings),
-- HTTP, and deciding. The target is ceiling_target's one row.
BEGIN;
SELECT remaining FROM ticket_types WHERE id = (SELECT ticket_type_id FROM ceiling_target) FOR UPDATE;
WITH buyers AS (
    SELECT gen_random_uuid() AS id, 'ceiling-' || gen_random_uuid() || '@load.example.org' AS email
    FROM generate_series(1, :batch)
), new_orders AS (
    INSERT INTO orders (id, ticket_type_id, email, quantity, idempotency_key, unit_price_minor,
                        currency, cancel_secret_hash, buyer_key, status)
    SELECT b.id, t.ticket_type_id, b.email, 1, md5(b.id::text), 2500, 'EUR',
           sha256(b.id::text::bytea), encode(sha256(b.email::bytea), 'hex'), 'confirmed'
    FROM buyers b, ceiling_target t
    ON CONFLICT ON CONSTRAINT orders_buyer_idempotency_key DO NOTHING
    RETURNING id, email, quantity, status, created_at, buyer_key, ticket_type_id
), held AS (
    INSERT INTO buyer_holdings (ticket_type_id, buyer_key, quantity)
    SELECT n.ticket_type_id, n.buyer_key, sum(n.quantity)::int4 FROM new_orders n
    GROUP BY n.ticket_type_id, n.buyer_key ORDER BY n.buyer_key
    ON CONFLICT (ticket_type_id, buyer_key) DO UPDATE
        SET quantity = buyer_holdings.quantity + EXCLUDED.quantity
    RETURNING 1
), held_in_event AS (
    INSERT INTO event_buyer_holdings (event_id, buyer_key, quantity)
    SELECT t.event_id, n.buyer_key, sum(n.quantity)::int4 FROM new_orders n, ceiling_target t
    GROUP BY t.event_id, n.buyer_key ORDER BY n.buyer_key
    ON CONFLICT (event_id, buyer_key) DO UPDATE
        SET quantity = event_buyer_holdings.quantity + EXCLUDED.quantity
    RETURNING 1
), seats AS (
    INSERT INTO tickets (order_id, position)
    SELECT n.id, generate_series(1, n.quantity) FROM new_orders n
), outboxed AS (
    INSERT INTO outbox (kind, event_id, order_id, ticket_type_id, sequence, payload)
    SELECT 'order.created', t.event_id, n.id, n.ticket_type_id, 1,
           jsonb_build_object('order_id', n.id, 'event_id', t.event_id,
                              'ticket_type_id', n.ticket_type_id, 'email', n.email,
                              'quantity', n.quantity, 'status', n.status,
                              'unit_price_minor', 2500, 'currency', 'EUR',
                              'created_at', n.created_at, 'hold_expires_at', NULL)
    FROM new_orders n, ceiling_target t
), stock AS (
    UPDATE ticket_types t
    SET remaining = t.remaining - (SELECT coalesce(sum(n.quantity), 0) FROM new_orders n)
    WHERE t.id = (SELECT ticket_type_id FROM ceiling_target)
      AND t.remaining - (SELECT coalesce(sum(n.quantity), 0) FROM new_orders n) >= 0
    RETURNING t.remaining
)
SELECT count(*), (SELECT count(*) FROM held), (SELECT count(*) FROM held_in_event),
       (SELECT remaining FROM stock)
FROM new_orders;
COMMIT;
