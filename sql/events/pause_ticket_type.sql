UPDATE ticket_types t SET sales_halted = $4
FROM events e
WHERE t.id = $1 AND t.event_id = $2 AND e.id = t.event_id AND e.organizer_id = $3
  -- The ticket type's copy of the status, re-read after waiting on the row:
  -- a cancelled event's sales stay halted.
  AND t.event_status <> 'cancelled'
RETURNING t.sales_halted
