UPDATE payments SET intent_id = $2, client_secret = $3, creating_until = NULL
WHERE order_id = $1 AND intent_id IS NULL
