SELECT CASE WHEN o.cancel_reason = 'expired' THEN 'expired' ELSE o.status END AS "status!: OrderStatus",
       o.confirm_token_hash = $2 AS "token_matches?"
FROM orders o WHERE o.id = $1
