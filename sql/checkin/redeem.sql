WITH live AS (
    SELECT t.id, tt.name
    FROM tickets t
    JOIN orders o ON o.id = t.order_id
    JOIN ticket_types tt ON tt.id = o.ticket_type_id
    WHERE t.code = $1 AND tt.event_id = $2 AND o.status = 'confirmed'
    FOR SHARE OF o
)
UPDATE tickets t
SET redeemed_at = $3, redeemed_door = $4, redeemed_seq = pg_current_xact_id()::text::bigint
FROM live
WHERE t.id = live.id AND t.redeemed_at IS NULL
RETURNING live.name AS ticket_type, t.redeemed_at AS "redeemed_at!"
