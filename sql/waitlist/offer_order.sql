WITH entry AS (
    SELECT w.id, w.email, w.buyer_key, w.token_hash, t.id AS ticket_type_id, t.event_id,
           t.price_minor, t.currency,
           CASE WHEN t.price_minor > 0 AND e.payment = 'stripe' THEN e.pay_seconds
                ELSE e.hold_seconds END AS hold_seconds
    FROM waitlist_entries w
    JOIN ticket_types t ON t.id = w.ticket_type_id
    JOIN events e ON e.id = t.event_id
    WHERE w.id = $1 AND w.status = 'waiting'
), new_order AS (
    -- Held for the event's hold time (10 minutes if its orders are
    -- confirmed at once; its time to pay for a ticket with a price); the
    -- place's token confirms it (or, with a price, opens its pay page), or
    -- releases it (as its cancel secret).
    INSERT INTO orders (ticket_type_id, email, quantity, idempotency_key, unit_price_minor, currency,
                        buyer_key, status, hold_expires_at, confirm_token_hash, cancel_secret_hash)
    SELECT en.ticket_type_id, en.email, $2, 'waitlist:' || en.id::text, en.price_minor, en.currency,
           en.buyer_key, 'held', $3::timestamptz + make_interval(secs => COALESCE(en.hold_seconds, 600)),
           en.token_hash, en.token_hash
    FROM entry en
    RETURNING id, ticket_type_id, email, quantity, status, unit_price_minor, currency, created_at,
              hold_expires_at
), offered AS (
    UPDATE waitlist_entries w SET status = 'offered', order_id = n.id, offered_at = $3
    FROM new_order n WHERE w.id = $1
), outboxed AS (
    INSERT INTO outbox (kind, event_id, order_id, ticket_type_id, sequence, payload)
    SELECT 'order.created', en.event_id, n.id, n.ticket_type_id, 1,
           jsonb_build_object('order_id', n.id, 'event_id', en.event_id,
                              'ticket_type_id', n.ticket_type_id, 'email', n.email,
                              'quantity', n.quantity, 'status', n.status,
                              'unit_price_minor', n.unit_price_minor, 'currency', n.currency,
                              'created_at', n.created_at, 'hold_expires_at', n.hold_expires_at,
                              'waitlist_entry_id', en.id)
    FROM new_order n, entry en
)
SELECT id FROM new_order
