UPDATE waitlist_entries
SET status = 'waiting', position = nextval('waitlist_position'), confirmed_at = $3
WHERE id = $1 AND token_hash = $2 AND status = 'unconfirmed'
RETURNING id
