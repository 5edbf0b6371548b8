INSERT INTO payments (order_id, amount_minor, currency)
SELECT o.id, o.unit_price_minor * o.quantity, o.currency FROM orders o
WHERE o.id = $1 AND o.status = 'held' AND o.unit_price_minor > 0
ON CONFLICT (order_id) DO NOTHING
