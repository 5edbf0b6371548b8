-- Loaded before every permutation of every spec (tests/isolation.rs adds it
-- as the spec's first setup block; reset.sql is its teardown). Ids are fixed
-- so that steps can name them. No closing brace here: it would end the setup block.
INSERT INTO organizers (id, email, password_hash)
VALUES ('00000000-0000-0000-0000-00000000000a', 'organizer@example.org', 'not a hash');

-- On sale from 2020 until the event starts in 2030: a step's `now` of
-- 2026-06-01 is inside the window.
INSERT INTO events (id, organizer_id, title, venue, starts_at, sale_opens_at, sale_closes_at, status)
VALUES ('00000000-0000-0000-0000-0000000000e1', '00000000-0000-0000-0000-00000000000a',
        'The show', 'The hall', '2030-01-01 20:00+00', '2020-01-01 00:00+00', NULL, 'published');

-- last: 3 seats, 2 of them sold to early@ (order ...e0, cancel secret '\xaa'): 1 left.
-- roomy: 10 seats, at most 2 per order and 3 per buyer.
INSERT INTO ticket_types (id, event_id, position, name, price_minor, currency, capacity, remaining,
                          max_per_order, max_per_buyer)
VALUES ('00000000-0000-0000-0000-0000000000a1', '00000000-0000-0000-0000-0000000000e1', 0,
        'last', 1000, 'EUR', 3, 1, 2, 2),
       ('00000000-0000-0000-0000-0000000000a2', '00000000-0000-0000-0000-0000000000e1', 1,
        'roomy', 1000, 'EUR', 10, 10, 2, 3);

INSERT INTO orders (id, ticket_type_id, email, quantity, unit_price_minor, currency, idempotency_key,
                    cancel_secret_hash, buyer_key)
VALUES ('00000000-0000-0000-0000-0000000000e0', '00000000-0000-0000-0000-0000000000a1',
        'early@example.org', 2, 1000, 'EUR', 'early-key-0000001', '\xaa', 'early@example.org');
INSERT INTO tickets (order_id, position)
VALUES ('00000000-0000-0000-0000-0000000000e0', 1), ('00000000-0000-0000-0000-0000000000e0', 2);
INSERT INTO buyer_holdings (ticket_type_id, buyer_key, quantity)
VALUES ('00000000-0000-0000-0000-0000000000a1', 'early@example.org', 2);
INSERT INTO event_buyer_holdings (event_id, buyer_key, quantity)
VALUES ('00000000-0000-0000-0000-0000000000e1', 'early@example.org', 2);
-- The early@ order's message, as its purchase would have written it.
INSERT INTO outbox (kind, event_id, order_id, ticket_type_id, sequence, payload)
VALUES ('order.created', '00000000-0000-0000-0000-0000000000e1',
        '00000000-0000-0000-0000-0000000000e0', '00000000-0000-0000-0000-0000000000a1', 1,
        jsonb_build_object('order_id', '00000000-0000-0000-0000-0000000000e0'));
