UPDATE waitlist_entries SET status = 'left'
WHERE id = $1 AND token_hash = $2 AND status IN ('unconfirmed', 'waiting')
RETURNING id
