UPDATE event_buyer_holdings h SET quantity = h.quantity - $3
FROM ticket_types t WHERE t.id = $1 AND h.event_id = t.event_id AND h.buyer_key = $2
