SELECT o.held_by_address AS "address!", t.event_id
FROM orders o JOIN ticket_types t ON t.id = o.ticket_type_id
WHERE o.id = $1 AND o.held_by_address IS NOT NULL
