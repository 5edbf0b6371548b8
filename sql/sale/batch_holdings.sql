SELECT 'type' AS "scope!", buyer_key, quantity FROM buyer_holdings
WHERE ticket_type_id = $1 AND buyer_key = ANY($3)
UNION ALL
SELECT 'event', buyer_key, quantity FROM event_buyer_holdings
WHERE event_id = $2 AND buyer_key = ANY($3)
