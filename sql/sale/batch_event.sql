SELECT status AS "status: EventStatus", sale_opens_at, sale_closes_at, starts_at,
       max_per_buyer, hold_seconds
FROM events WHERE id = $1
