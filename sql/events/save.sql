WITH edited AS (
    UPDATE events SET title = $3, description = $4, venue = $5, starts_at = $6,
           sale_opens_at = $7, sale_closes_at = $8, max_per_buyer = $10, hold_seconds = $11,
           pay_seconds = $12, payment = CASE WHEN $13 THEN 'stripe' ELSE 'offline' END,
           time_zone = $14,
           updated_at = now()
    WHERE id = $1 AND organizer_id = $2 AND status <> 'cancelled'
    RETURNING id
), created AS (
    INSERT INTO events (organizer_id, title, description, venue, starts_at,
                        sale_opens_at, sale_closes_at, status, max_per_buyer, hold_seconds,
                        pay_seconds, payment, time_zone)
    SELECT $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12,
           CASE WHEN $13 THEN 'stripe' ELSE 'offline' END, $14 WHERE $1::uuid IS NULL
    RETURNING id
)
SELECT id AS "id!" FROM edited UNION ALL SELECT id FROM created
