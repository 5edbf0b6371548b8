UPDATE events SET status = $3, updated_at = now()
WHERE id = $1 AND organizer_id = $2 AND status <> 'cancelled'
