WITH new_orders AS (
    -- With a hold ($17 seconds, or per order $19 seconds: a mailbox not yet
    -- proven gets a shorter first window), ids and token hashes come from
    -- the app (the token is derived from the id); without, both arrays are
    -- empty. An unproven mailbox's hold counts against its client address
    -- ($20), which the batch counted under the address's lock.
    INSERT INTO orders (id, ticket_type_id, email, quantity, idempotency_key, unit_price_minor,
                        currency, cancel_secret_hash, buyer_key, queue_entry_id,
                        status, hold_expires_at, confirm_token_hash, presale_code_id,
                        held_by_address)
    SELECT coalesce(r.id, gen_random_uuid()), $1, r.email, r.quantity, r.idempotency_key, $5, $6,
           r.hash, r.buyer_key, r.queue_entry_id,
           CASE WHEN $17::int4 IS NULL THEN 'confirmed' ELSE 'held' END,
           $9::timestamptz + make_interval(secs => coalesce(r.hold_secs, $17::int4)), r.token_hash,
           r.code_id, CASE WHEN $17::int4 IS NOT NULL THEN r.address END
    FROM unnest($2::text[], $3::int4[], $4::text[], $10::bytea[], $11::text[], $14::uuid[],
                $15::uuid[], $16::bytea[], $18::uuid[], $19::int4[], $20::text[])
         AS r (email, quantity, idempotency_key, hash, buyer_key, queue_entry_id, id, token_hash,
               code_id, hold_secs, address)
    ON CONFLICT ON CONSTRAINT orders_buyer_idempotency_key DO NOTHING
    RETURNING id, email, quantity, idempotency_key, status, created_at, buyer_key, hold_expires_at,
              presale_code_id
), held AS (
    INSERT INTO buyer_holdings (ticket_type_id, buyer_key, quantity)
    SELECT $1, n.buyer_key, sum(n.quantity)::int4 FROM new_orders n
    GROUP BY n.buyer_key ORDER BY n.buyer_key
    ON CONFLICT (ticket_type_id, buyer_key) DO UPDATE
        SET quantity = buyer_holdings.quantity + EXCLUDED.quantity
        WHERE buyer_holdings.quantity + EXCLUDED.quantity <= $7
    RETURNING 1
), held_in_event AS (
    INSERT INTO event_buyer_holdings (event_id, buyer_key, quantity)
    SELECT $12, n.buyer_key, sum(n.quantity)::int4 FROM new_orders n
    GROUP BY n.buyer_key ORDER BY n.buyer_key
    ON CONFLICT (event_id, buyer_key) DO UPDATE
        SET quantity = event_buyer_holdings.quantity + EXCLUDED.quantity
        WHERE event_buyer_holdings.quantity + EXCLUDED.quantity
              <= COALESCE($13, event_buyer_holdings.quantity + EXCLUDED.quantity)
    RETURNING 1
), coded AS (
    -- Presale codes' uses, like the stock: on the code's own row, within
    -- its limit, or the batch is wrong and rolls back.
    UPDATE presale_codes c SET used = c.used + s.quantity
    FROM (SELECT n.presale_code_id AS id, sum(n.quantity)::int4 AS quantity FROM new_orders n
          WHERE n.presale_code_id IS NOT NULL GROUP BY n.presale_code_id) s
    WHERE c.id = s.id AND c.used + s.quantity <= c.max_uses
    RETURNING 1
), seats AS (
    INSERT INTO tickets (order_id, position)
    -- A held order gets its tickets when it is confirmed.
    SELECT n.id, generate_series(1, n.quantity) FROM new_orders n WHERE n.status = 'confirmed'
), outboxed AS (
    INSERT INTO outbox (kind, event_id, order_id, ticket_type_id, sequence, payload)
    SELECT 'order.created', $12, n.id, $1, 1,
           jsonb_build_object('order_id', n.id, 'event_id', $12::uuid, 'ticket_type_id', $1::uuid,
                              'email', n.email, 'quantity', n.quantity, 'status', n.status,
                              'unit_price_minor', $5::int8, 'currency', $6::text,
                              'created_at', n.created_at, 'hold_expires_at', n.hold_expires_at)
    FROM new_orders n
), stock AS (
    UPDATE ticket_types t
    SET remaining = t.remaining - (SELECT coalesce(sum(n.quantity), 0) FROM new_orders n)
    WHERE t.id = $1
      AND t.remaining - (SELECT coalesce(sum(n.quantity), 0) FROM new_orders n) >= 0
      AND $8 <= t.max_per_order AND NOT t.sales_halted
      AND sale_open(t.event_status, t.event_sale_opens_at, t.event_sale_closes_at,
                    t.event_starts_at, $9)
    RETURNING t.remaining
)
SELECT n.id AS "id!", n.email AS "email!", n.quantity AS "quantity!",
       n.idempotency_key AS "idempotency_key!", n.status AS "status!: OrderStatus",
       n.created_at AS "created_at!", n.hold_expires_at,
       (SELECT count(*) FROM held) AS "held!",
       (SELECT count(*) FROM held_in_event) AS "held_in_event!",
       (SELECT count(*) FROM coded) AS "coded!", n.presale_code_id,
       (SELECT remaining FROM stock) AS "remaining?"
FROM new_orders n
