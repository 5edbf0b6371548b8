UPDATE ticket_types SET remaining = capacity WHERE event_id = $1
