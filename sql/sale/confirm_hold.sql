WITH confirmed AS (
    -- The row lock is the referee: a sweeper that expired the hold first
    -- leaves it cancelled, and this re-checks the status and matches nothing.
    UPDATE orders o SET status = 'confirmed', confirmed_at = $3
    FROM ticket_types t
    -- An order with a price is confirmed by its payment only (src/payments/).
    WHERE o.id = $1 AND o.confirm_token_hash = $2 AND o.status = 'held'
      AND o.hold_expires_at > $3 AND t.id = o.ticket_type_id
      AND NOT (o.unit_price_minor > 0
               AND EXISTS (SELECT 1 FROM events e WHERE e.id = t.event_id AND e.payment = 'stripe'))
    RETURNING o.id, o.ticket_type_id, t.event_id, o.email, o.quantity, o.status, o.confirmed_at
), seats AS (
    INSERT INTO tickets (order_id, position)
    SELECT c.id, generate_series(1, c.quantity) FROM confirmed c
), outboxed AS (
    INSERT INTO outbox (kind, event_id, order_id, ticket_type_id, sequence, payload)
    SELECT 'order.confirmed', c.event_id, c.id, c.ticket_type_id, 2,
           jsonb_build_object('order_id', c.id, 'event_id', c.event_id,
                              'ticket_type_id', c.ticket_type_id, 'email', c.email,
                              'quantity', c.quantity, 'status', c.status,
                              'confirmed_at', c.confirmed_at)
    FROM confirmed c
)
SELECT id FROM confirmed
