INSERT INTO event_buyer_holdings (event_id, buyer_key, quantity)
SELECT e.id, $2, $3 FROM ticket_types t JOIN events e ON e.id = t.event_id
WHERE t.id = $1 AND $3 <= COALESCE(e.max_per_buyer, $3)
ON CONFLICT (event_id, buyer_key) DO UPDATE
    SET quantity = event_buyer_holdings.quantity + EXCLUDED.quantity
    WHERE event_buyer_holdings.quantity + EXCLUDED.quantity
          <= COALESCE((SELECT max_per_buyer FROM events WHERE id = EXCLUDED.event_id),
                      event_buyer_holdings.quantity + EXCLUDED.quantity)
RETURNING quantity
