SELECT e.payment = 'stripe' AND o.unit_price_minor > 0 AS "takes_payment!",
       p.status AS "status?", p.refund AS "refund?", p.refund_reason AS "refund_reason?",
       p.amount_minor AS "amount_minor?"
FROM orders o
JOIN ticket_types t ON t.id = o.ticket_type_id
JOIN events e ON e.id = t.event_id
LEFT JOIN payments p ON p.order_id = o.id
WHERE o.id = $1
