SELECT (SELECT o.id FROM orders o WHERE o.email = $2 AND o.idempotency_key = $3)
           AS "existing_order?",
       t.remaining, t.max_per_order, t.max_per_buyer, t.sales_halted, t.hidden,
       e.max_per_buyer AS event_max_per_buyer,
       e.status AS "status: EventStatus", e.sale_opens_at, e.sale_closes_at,
       e.starts_at
FROM ticket_types t JOIN events e ON e.id = t.event_id
WHERE t.id = $1 AND ($4::uuid IS NULL OR t.event_id = $4)
