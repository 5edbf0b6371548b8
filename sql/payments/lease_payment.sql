UPDATE payments SET creating_until = $2 + interval '45 seconds'
WHERE order_id = $1 AND intent_id IS NULL AND (creating_until IS NULL OR creating_until < $2)
RETURNING amount_minor, currency
