UPDATE payments p
SET refund = 'due', refund_next_at = $3,
    refund_reason = CASE WHEN EXISTS (
                             SELECT 1 FROM orders o JOIN ticket_types t ON t.id = o.ticket_type_id
                             JOIN events e ON e.id = t.event_id
                             WHERE o.id = p.order_id AND e.status = 'cancelled')
                         THEN 'event_cancelled' ELSE $2 END
WHERE p.order_id = $1 AND p.status = 'succeeded' AND p.refund IS NULL
