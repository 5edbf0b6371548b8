WITH cancelled AS (
    UPDATE orders o SET status = 'cancelled', cancelled_at = now()
    FROM ticket_types t, events e
    WHERE o.id = $1 AND o.status IN ('held', 'confirmed')
      AND t.id = o.ticket_type_id AND e.id = t.event_id AND e.organizer_id = $2
      AND t.event_starts_at > $3
    RETURNING o.id, o.ticket_type_id, t.event_id, o.buyer_key, o.email, o.quantity, o.status,
              o.cancelled_at, o.presale_code_id,
              -- After 'order.created' (1), and 'order.confirmed' (2) for a confirmed hold.
              CASE WHEN o.confirmed_at IS NULL THEN 2 ELSE 3 END AS sequence
), outboxed AS (
    INSERT INTO outbox (kind, event_id, order_id, ticket_type_id, sequence, payload)
    SELECT 'order.cancelled', c.event_id, c.id, c.ticket_type_id, c.sequence,
           jsonb_build_object('order_id', c.id, 'event_id', c.event_id,
                              'ticket_type_id', c.ticket_type_id, 'quantity', c.quantity,
                              'status', c.status, 'cancelled_at', c.cancelled_at,
                              'reason', 'organizer')
    FROM cancelled c
)
SELECT ticket_type_id, COALESCE(buyer_key, email) AS "buyer_key!", quantity, presale_code_id
FROM cancelled
