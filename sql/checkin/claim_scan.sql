INSERT INTO check_in_scans (event_id, nonce, code, door, scanned_at)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (event_id, nonce) DO NOTHING
RETURNING nonce
