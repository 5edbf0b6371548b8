UPDATE ticket_types
SET name = $3, price_minor = $4, currency = $5, max_per_order = $6, max_per_buyer = $7,
    position = $8, remaining = remaining + ($9 - capacity), capacity = $9, hidden = $10
WHERE id = $1 AND event_id = $2 AND remaining + ($9 - capacity) >= 0
RETURNING id
