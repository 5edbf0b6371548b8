WITH due AS (
    -- Rows another sweeper (or a confirmation) holds are skipped: each
    -- expired hold is claimed by exactly one transaction.
    SELECT id FROM orders
    WHERE status = 'held' AND hold_expires_at <= $1
    ORDER BY hold_expires_at LIMIT $2
    FOR UPDATE SKIP LOCKED
), expired AS (
    UPDATE orders o SET status = 'cancelled', cancelled_at = $1, cancel_reason = 'expired'
    FROM due, ticket_types t
    WHERE o.id = due.id AND o.status = 'held' AND t.id = o.ticket_type_id
    RETURNING o.id, o.ticket_type_id, t.event_id, COALESCE(o.buyer_key, o.email) AS buyer_key,
              o.quantity, o.hold_expires_at, o.presale_code_id
), outboxed AS (
    INSERT INTO outbox (kind, event_id, order_id, ticket_type_id, sequence, payload)
    SELECT 'order.expired', e.event_id, e.id, e.ticket_type_id, 2,
           jsonb_build_object('order_id', e.id, 'event_id', e.event_id,
                              'ticket_type_id', e.ticket_type_id, 'quantity', e.quantity,
                              'status', 'expired', 'hold_expires_at', e.hold_expires_at)
    FROM expired e
)
SELECT ticket_type_id AS "ticket_type_id!", event_id AS "event_id!", buyer_key AS "buyer_key!",
       quantity AS "quantity!", presale_code_id
FROM expired
