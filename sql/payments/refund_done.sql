WITH done AS (
    UPDATE payments SET refund = 'done', refunded_at = $3, refund_id = $2, refund_error = NULL
    WHERE order_id = $1 AND refund = 'due'
    RETURNING order_id, amount_minor, currency, refund_reason, intent_id
)
-- Last of the order's messages, whatever came before it.
INSERT INTO outbox (kind, event_id, order_id, ticket_type_id, sequence, payload)
SELECT 'order.refunded', t.event_id, o.id, o.ticket_type_id, 9,
       jsonb_build_object('order_id', o.id, 'event_id', t.event_id,
                          'ticket_type_id', o.ticket_type_id, 'email', o.email,
                          'amount_minor', d.amount_minor, 'currency', d.currency,
                          'reason', d.refund_reason, 'payment_intent', d.intent_id,
                          'refund_id', $2::text, 'refunded_at', $3::timestamptz)
FROM done d JOIN orders o ON o.id = d.order_id JOIN ticket_types t ON t.id = o.ticket_type_id
