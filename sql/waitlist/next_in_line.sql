SELECT w.id, w.buyer_key,
       LEAST(w.quantity, t.remaining, t.max_per_order,
             t.max_per_buyer - COALESCE(h.quantity, 0),
             COALESCE(e.max_per_buyer - COALESCE(eh.quantity, 0), w.quantity)) AS "offer!"
FROM waitlist_entries w
JOIN ticket_types t ON t.id = w.ticket_type_id
JOIN events e ON e.id = t.event_id
LEFT JOIN buyer_holdings h ON h.ticket_type_id = t.id AND h.buyer_key = w.buyer_key
LEFT JOIN event_buyer_holdings eh ON eh.event_id = e.id AND eh.buyer_key = w.buyer_key
WHERE w.ticket_type_id = $1 AND w.status = 'waiting' AND t.remaining > 0
  AND e.waitlist_offers AND NOT t.hidden AND NOT t.sales_halted
  AND sale_open(t.event_status, t.event_sale_opens_at, t.event_sale_closes_at, t.event_starts_at, $2)
ORDER BY w.position
LIMIT 1
FOR UPDATE OF w
