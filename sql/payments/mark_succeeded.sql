UPDATE payments SET status = 'succeeded', succeeded_at = $2
WHERE order_id = $1 AND status <> 'succeeded'
RETURNING amount_minor, currency, intent_id AS "intent_id!"
