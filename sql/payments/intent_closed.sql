UPDATE payments SET intent_closed_at = $2 WHERE intent_id = $1 AND status = 'failed'
