SELECT o.status AS "status: OrderStatus", o.quantity, o.unit_price_minor, o.currency,
       o.hold_expires_at, t.name AS ticket_type_name, e.title AS event_title,
       e.time_zone AS "zone: Zone",
       e.payment = 'stripe' AS "takes_payment!",
       COALESCE($4 OR o.cancel_secret_hash = $2 OR o.confirm_token_hash = $3, false) AS "proven!",
       p.status AS "payment_status?", p.intent_id AS "intent_id?"
FROM orders o
JOIN ticket_types t ON t.id = o.ticket_type_id
JOIN events e ON e.id = t.event_id
LEFT JOIN payments p ON p.order_id = o.id
WHERE o.id = $1
