INSERT INTO buyer_holdings (ticket_type_id, buyer_key, quantity)
SELECT t.id, $2, $3 FROM ticket_types t WHERE t.id = $1 AND $3 <= t.max_per_buyer
ON CONFLICT (ticket_type_id, buyer_key) DO UPDATE
    SET quantity = buyer_holdings.quantity + EXCLUDED.quantity
    WHERE buyer_holdings.quantity + EXCLUDED.quantity
          <= (SELECT max_per_buyer FROM ticket_types WHERE id = EXCLUDED.ticket_type_id)
RETURNING quantity
