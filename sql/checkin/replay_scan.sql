SELECT code, result, ticket_type, redeemed_at, redeemed_door
FROM check_in_scans
WHERE event_id = $1 AND nonce = $2
