SELECT capacity - remaining FROM ticket_types WHERE id = $1 AND event_id = $2
