WITH joined AS (
    INSERT INTO waitlist_entries (id, ticket_type_id, email, buyer_key, quantity, token_hash, created_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7)
    ON CONFLICT (ticket_type_id, buyer_key) WHERE status IN ('unconfirmed', 'waiting') DO NOTHING
    RETURNING id, ticket_type_id, email, quantity
), outboxed AS (
    INSERT INTO outbox (kind, event_id, order_id, ticket_type_id, sequence, payload)
    SELECT 'waitlist.joined', t.event_id, NULL, NULL, 1,
           jsonb_build_object('waitlist_entry_id', j.id, 'event_id', t.event_id,
                              'ticket_type_id', j.ticket_type_id, 'email', j.email,
                              'quantity', j.quantity)
    FROM joined j JOIN ticket_types t ON t.id = j.ticket_type_id
)
SELECT id FROM joined
