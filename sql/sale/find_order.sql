SELECT o.id, o.ticket_type_id, o.email, o.quantity,
       -- An expired hold is cancelled in the table, `expired` to its buyer.
       CASE WHEN o.cancel_reason = 'expired' THEN 'expired' ELSE o.status END AS "status!: OrderStatus",
       o.unit_price_minor, o.currency, o.created_at, o.hold_expires_at
FROM orders o WHERE o.id = $1 OR (o.email = $2 AND o.idempotency_key = $3)
