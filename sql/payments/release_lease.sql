UPDATE payments SET creating_until = NULL WHERE order_id = $1 AND intent_id IS NULL
