UPDATE ticket_types t SET remaining = t.remaining - $2
WHERE t.id = $1 AND t.remaining - $2 >= 0 AND NOT t.sales_halted
  AND t.event_status = 'published'
RETURNING t.remaining
