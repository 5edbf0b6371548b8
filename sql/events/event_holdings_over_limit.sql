-- After an edit's writes: the most one buyer holds across the event's
-- ticket types, if that is above the event's (lowered) limit per buyer.
SELECT MAX(h.quantity) AS held
FROM event_buyer_holdings h JOIN events e ON e.id = h.event_id
WHERE e.id = $1 AND e.max_per_buyer IS NOT NULL AND h.quantity > e.max_per_buyer
