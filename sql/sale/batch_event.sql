SELECT status AS "status: EventStatus", sale_opens_at, sale_closes_at, starts_at,
       max_per_buyer, hold_seconds, pay_seconds,
       payment = 'stripe' AS "takes_payment!"
FROM events WHERE id = $1
