SELECT tt.event_id = $2 AS "right_event!", o.status AS order_status, tt.name AS ticket_type,
       t.redeemed_at, t.redeemed_door
FROM tickets t
JOIN orders o ON o.id = t.order_id
JOIN ticket_types tt ON tt.id = o.ticket_type_id
WHERE t.code = $1
