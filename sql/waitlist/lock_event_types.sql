SELECT id FROM ticket_types WHERE event_id = $1 ORDER BY id FOR UPDATE
