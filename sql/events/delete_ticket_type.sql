DELETE FROM ticket_types t USING events e
WHERE t.id = $1 AND t.event_id = $2 AND e.id = t.event_id AND e.organizer_id = $3
  AND e.status <> 'cancelled' AND t.remaining = t.capacity
  AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.ticket_type_id = t.id)
  AND (SELECT count(*) FROM ticket_types s WHERE s.event_id = $2) > 1
