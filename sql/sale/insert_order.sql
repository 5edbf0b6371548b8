WITH new_order AS (
    -- The id and the token hash come from the app (the confirmation token is
    -- derived from the id); the hash is kept only if the event holds orders.
    -- A mailbox is proven once a held order of its buyer was confirmed from
    -- its mail: it gets the event's full hold and counts against no address.
    -- Otherwise the hold ends after the first window ($12 seconds) if that is
    -- shorter, and counts against the client address ($13). A ticket with a
    -- price is held for the event's time to pay, in full: paying proves more
    -- than a mailbox does.
    INSERT INTO orders (id, ticket_type_id, email, quantity, idempotency_key, unit_price_minor, currency,
                        cancel_secret_hash, buyer_key, queue_entry_id,
                        status, hold_expires_at, confirm_token_hash, presale_code_id,
                        held_by_address)
    SELECT $8, t.id, $2, $3, $4, t.price_minor, t.currency, $5, $6, $7,
           CASE WHEN h.seconds IS NULL THEN 'confirmed' ELSE 'held' END,
           $10::timestamptz + make_interval(secs => CASE WHEN h.seconds IS NULL THEN NULL
                                                   WHEN b.proven OR (t.price_minor > 0 AND e.payment = 'stripe')
                                                        THEN h.seconds
                                                   ELSE LEAST(h.seconds, $12::int4) END),
           CASE WHEN h.seconds IS NULL THEN NULL ELSE $9::bytea END, $11,
           CASE WHEN h.seconds IS NOT NULL AND NOT b.proven THEN $13::text END
    FROM ticket_types t JOIN events e ON e.id = t.event_id,
         LATERAL (SELECT CASE WHEN t.price_minor > 0 AND e.payment = 'stripe' THEN e.pay_seconds
                              ELSE e.hold_seconds END AS seconds) h,
         LATERAL (SELECT EXISTS (SELECT 1 FROM orders p
                                 WHERE p.buyer_key = $6 AND p.confirmed_at IS NOT NULL) AS proven) b
    WHERE t.id = $1
    ON CONFLICT ON CONSTRAINT orders_buyer_idempotency_key DO NOTHING
    RETURNING id, ticket_type_id, email, quantity, status, unit_price_minor, currency, created_at,
              hold_expires_at
), outboxed AS (
    INSERT INTO outbox (kind, event_id, order_id, ticket_type_id, sequence, payload)
    SELECT 'order.created', t.event_id, n.id, n.ticket_type_id, 1,
           jsonb_build_object('order_id', n.id, 'event_id', t.event_id,
                              'ticket_type_id', n.ticket_type_id, 'email', n.email,
                              'quantity', n.quantity, 'status', n.status,
                              'unit_price_minor', n.unit_price_minor, 'currency', n.currency,
                              'created_at', n.created_at, 'hold_expires_at', n.hold_expires_at)
    FROM new_order n JOIN ticket_types t ON t.id = n.ticket_type_id
)
SELECT id, ticket_type_id, email, quantity, status AS "status: OrderStatus",
       unit_price_minor, currency, created_at, hold_expires_at
FROM new_order
