UPDATE check_in_scans
SET result = $3, ticket_type = $4, redeemed_at = $5, redeemed_door = $6
WHERE event_id = $1 AND nonce = $2
