UPDATE ticket_types SET sales_halted = true WHERE event_id = $1 AND NOT sales_halted
