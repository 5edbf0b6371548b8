UPDATE ticket_types SET remaining = remaining + $2 WHERE id = $1
