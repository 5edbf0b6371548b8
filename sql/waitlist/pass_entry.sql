UPDATE waitlist_entries SET status = 'passed' WHERE id = $1 AND status = 'waiting'
