SELECT remaining FROM ticket_types WHERE id = $1 FOR UPDATE
