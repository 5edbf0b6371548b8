UPDATE ticket_types t SET remaining = t.remaining - $2
WHERE t.id = $1 AND t.remaining - $2 >= 0
  AND $2 <= t.max_per_order AND NOT t.sales_halted
  AND sale_open(t.event_status, t.event_sale_opens_at, t.event_sale_closes_at,
                t.event_starts_at, $3)
RETURNING t.remaining
