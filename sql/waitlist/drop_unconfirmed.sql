UPDATE waitlist_entries SET status = 'left'
WHERE ticket_type_id = $1 AND buyer_key = $2 AND status = 'unconfirmed' AND created_at < $3
