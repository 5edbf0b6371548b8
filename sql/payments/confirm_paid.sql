WITH confirmed AS (
    -- A held order, or (`$3`) one whose hold expired and whose stock the
    -- settlement took again: confirmed by its payment, with its tickets.
    UPDATE orders o SET status = 'confirmed', confirmed_at = $2, cancelled_at = NULL,
                        cancel_reason = NULL
    FROM ticket_types t
    WHERE o.id = $1 AND t.id = o.ticket_type_id
      AND (o.status = 'held' OR ($3 AND o.status = 'cancelled' AND o.cancel_reason = 'expired'))
    RETURNING o.id, o.ticket_type_id, t.event_id, o.email, o.quantity, o.status, o.confirmed_at,
              o.unit_price_minor * o.quantity AS total_minor, o.currency
), seats AS (
    INSERT INTO tickets (order_id, position)
    SELECT c.id, generate_series(1, c.quantity) FROM confirmed c
), outboxed AS (
    -- After 'order.created' (1); a late payment's after 'order.expired' (2).
    INSERT INTO outbox (kind, event_id, order_id, ticket_type_id, sequence, payload)
    SELECT m.kind, c.event_id, c.id, c.ticket_type_id, CASE WHEN $3 THEN 3 ELSE 2 END,
           jsonb_build_object('order_id', c.id, 'event_id', c.event_id,
                              'ticket_type_id', c.ticket_type_id, 'email', c.email,
                              'quantity', c.quantity, 'status', c.status,
                              'confirmed_at', c.confirmed_at, 'amount_minor', c.total_minor,
                              'currency', c.currency, 'payment_intent', $4::text, 'late', $3)
    FROM confirmed c, (VALUES ('order.confirmed'), ('order.paid')) AS m (kind)
)
SELECT id FROM confirmed
