UPDATE orders o SET status = 'cancelled', cancelled_at = now()
FROM ticket_types t
WHERE t.id = o.ticket_type_id AND t.event_id = $1 AND o.status = 'confirmed'
