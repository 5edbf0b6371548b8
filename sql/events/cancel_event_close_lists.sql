UPDATE waitlist_entries w SET status = 'closed'
FROM ticket_types t
WHERE t.id = w.ticket_type_id AND t.event_id = $1 AND w.status IN ('unconfirmed', 'waiting')
