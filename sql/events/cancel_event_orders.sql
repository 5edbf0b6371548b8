WITH cancelled AS (
    UPDATE orders o SET status = 'cancelled', cancelled_at = now()
    FROM ticket_types t
    WHERE t.id = o.ticket_type_id AND t.event_id = $1 AND o.status IN ('held', 'confirmed')
    RETURNING o.id, o.ticket_type_id, o.quantity, o.status, o.cancelled_at,
              CASE WHEN o.confirmed_at IS NULL THEN 2 ELSE 3 END AS sequence
)
INSERT INTO outbox (kind, event_id, order_id, ticket_type_id, sequence, payload)
SELECT 'order.cancelled', $1, c.id, c.ticket_type_id, c.sequence,
       jsonb_build_object('order_id', c.id, 'event_id', $1::uuid,
                          'ticket_type_id', c.ticket_type_id, 'quantity', c.quantity,
                          'status', c.status, 'cancelled_at', c.cancelled_at,
                          'reason', 'event_cancelled')
FROM cancelled c
