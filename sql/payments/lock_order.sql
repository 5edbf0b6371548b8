SELECT o.id, o.status AS "status: OrderStatus", o.cancel_reason, o.ticket_type_id, o.quantity,
       o.email, COALESCE(o.buyer_key, o.email) AS "buyer_key!", o.presale_code_id,
       o.unit_price_minor, o.currency, o.confirmed_at, t.event_id
FROM orders o JOIN ticket_types t ON t.id = o.ticket_type_id
WHERE o.id = (SELECT order_id FROM payments WHERE intent_id = $1)
FOR UPDATE OF o
