WITH in_type AS (
    -- The buyer's limits, as a sale counts them: a late payment takes its
    -- tickets only within them.
    INSERT INTO buyer_holdings (ticket_type_id, buyer_key, quantity)
    SELECT t.id, $2, $3 FROM ticket_types t WHERE t.id = $1 AND $3 <= t.max_per_buyer
    ON CONFLICT (ticket_type_id, buyer_key) DO UPDATE
        SET quantity = buyer_holdings.quantity + EXCLUDED.quantity
        WHERE buyer_holdings.quantity + EXCLUDED.quantity
              <= (SELECT max_per_buyer FROM ticket_types WHERE id = EXCLUDED.ticket_type_id)
    RETURNING 1
), in_event AS (
    INSERT INTO event_buyer_holdings (event_id, buyer_key, quantity)
    SELECT e.id, $2, $3 FROM ticket_types t JOIN events e ON e.id = t.event_id
    WHERE t.id = $1 AND $3 <= COALESCE(e.max_per_buyer, $3)
    ON CONFLICT (event_id, buyer_key) DO UPDATE
        SET quantity = event_buyer_holdings.quantity + EXCLUDED.quantity
        WHERE event_buyer_holdings.quantity + EXCLUDED.quantity
              <= COALESCE((SELECT max_per_buyer FROM events WHERE id = EXCLUDED.event_id),
                          event_buyer_holdings.quantity + EXCLUDED.quantity)
    RETURNING 1
)
SELECT (SELECT count(*) FROM in_type) + (SELECT count(*) FROM in_event) AS "taken!"
