-- Loaded once into a template database that already has every migration
-- applied (tests/isolation.rs); each spec runs in a fresh copy. The rows
-- are in fixtures.sql, loaded before every permutation (reset.sql after it).
--
-- Test-only pins, so that the expected outputs are stable: order ids come
-- from a sequence (last_order() is this session's last one, for the steps
-- that follow an order's insert) and created_at from a fixed time. The
-- statements under test are untouched: they rely on the defaults.
CREATE SEQUENCE order_ids;
ALTER TABLE orders
    ALTER COLUMN id SET DEFAULT ('00000000-0000-0000-0000-' || lpad(nextval('order_ids')::text, 12, '0'))::uuid,
    ALTER COLUMN created_at SET DEFAULT '2026-06-01 12:00:00+00';
-- The app draws order ids itself (a held order's token is derived from
-- its id); steps pass this one, so that ids stay pinned.
CREATE FUNCTION next_order() RETURNS uuid LANGUAGE sql AS $$
    SELECT ('00000000-0000-0000-0000-' || lpad(nextval('order_ids')::text, 12, '0'))::uuid
$$;
CREATE FUNCTION last_order() RETURNS uuid LANGUAGE sql AS $$
    SELECT ('00000000-0000-0000-0000-' || lpad(currval('order_ids')::text, 12, '0'))::uuid
$$;

-- What every permutation ends with, one row per ticket type, from the
-- tables (the invariants of the design notes):
--   stock_ok          capacity = remaining + Σ quantity of live (held or
--                     confirmed) orders
--   buyer_limit_ok    no buyer's live quantity exceeds max_per_buyer
--   holdings_ok       each buyer's holdings row = their live quantity
--   one_order_per_key no (buyer, idempotency key) has two orders
--   outbox_ok         each order has one `order.created` message, each
--                     cancelled order one `order.cancelled` and each live
--                     order none; each expired hold one `order.expired`,
--                     each confirmed hold one `order.confirmed`; no message names an order that is not
--                     there (a rolled-back purchase leaves none); the type's
--                     availability messages alternate, their last one
--                     matching `remaining` (sold out exactly when it is 0)
--                     unless its sales are halted (a cancelled event)
CREATE VIEW invariants AS
SELECT t.name, t.remaining, coalesce(l.live, 0) AS live,
       t.capacity = t.remaining + coalesce(l.live, 0) AS stock_ok,
       coalesce(l.worst_buyer, 0) <= t.max_per_buyer AS buyer_limit_ok,
       NOT EXISTS (
           SELECT 1 FROM buyer_holdings h
           WHERE h.ticket_type_id = t.id
             AND h.quantity <> (SELECT coalesce(sum(o.quantity), 0) FROM orders o
                                WHERE o.ticket_type_id = t.id AND o.status IN ('held', 'confirmed')
                                  AND coalesce(o.buyer_key, o.email) = h.buyer_key)
       ) AS holdings_ok,
       NOT EXISTS (
           SELECT 1 FROM orders o WHERE o.ticket_type_id = t.id
           GROUP BY o.email, o.idempotency_key HAVING count(*) > 1
       ) AS one_order_per_key,
       NOT EXISTS (
           SELECT 1 FROM orders o WHERE o.ticket_type_id = t.id
             AND ((SELECT count(*) FROM outbox x
                   WHERE x.order_id = o.id AND x.kind = 'order.created') <> 1
               OR (SELECT count(*) FROM outbox x
                   WHERE x.order_id = o.id AND x.kind = 'order.cancelled')
                  <> (o.status = 'cancelled' AND o.cancel_reason IS NULL)::int
               OR (SELECT count(*) FROM outbox x
                   WHERE x.order_id = o.id AND x.kind = 'order.expired')
                  <> (o.cancel_reason = 'expired')::int
               OR (SELECT count(*) FROM outbox x
                   WHERE x.order_id = o.id AND x.kind = 'order.confirmed')
                  <> (o.confirmed_at IS NOT NULL)::int)
       ) AND NOT EXISTS (
           SELECT 1 FROM outbox x
           WHERE x.ticket_type_id = t.id AND x.order_id IS NOT NULL
             AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.id = x.order_id)
       ) AND (coalesce((
           SELECT x.kind = 'ticket_type.sold_out' FROM outbox x
           WHERE x.ticket_type_id = t.id AND x.order_id IS NULL
           ORDER BY x.sequence DESC LIMIT 1
       ) = (t.remaining = 0), true) OR t.sales_halted) AS outbox_ok
FROM ticket_types t
LEFT JOIN (
    SELECT ticket_type_id, sum(q)::int AS live, max(q) AS worst_buyer
    FROM (SELECT ticket_type_id, coalesce(buyer_key, email) AS buyer, sum(quantity)::int AS q
          FROM orders WHERE status IN ('held', 'confirmed') GROUP BY 1, 2) b
    GROUP BY ticket_type_id
) l ON l.ticket_type_id = t.id
ORDER BY t.position;

-- Rows whose parent is gone, per table of the sale whose foreign key is
-- checked per statement (migrations/0028_foreign_keys_per_statement.sql):
-- every count must be 0 after any interleaving (foreign_keys.spec).
CREATE VIEW orphans AS
SELECT 'orders' AS child, count(*) AS orphans FROM orders o
WHERE NOT EXISTS (SELECT 1 FROM ticket_types t WHERE t.id = o.ticket_type_id)
UNION ALL
SELECT 'tickets', count(*) FROM tickets k
WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.id = k.order_id)
UNION ALL
SELECT 'buyer_holdings', count(*) FROM buyer_holdings h
WHERE NOT EXISTS (SELECT 1 FROM ticket_types t WHERE t.id = h.ticket_type_id)
UNION ALL
SELECT 'event_buyer_holdings', count(*) FROM event_buyer_holdings h
WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.id = h.event_id);
