SELECT o.held_by_address AS "address!", sum(o.quantity)::int4 AS "quantity!"
FROM orders o JOIN ticket_types t ON t.id = o.ticket_type_id
WHERE o.status = 'held' AND o.held_by_address = ANY($2::text[]) AND t.event_id = $1
GROUP BY o.held_by_address
