UPDATE buyer_holdings h SET quantity = 0 FROM ticket_types t
WHERE t.id = h.ticket_type_id AND t.event_id = $1 AND h.quantity <> 0
