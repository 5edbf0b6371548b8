SELECT o.status AS "status: OrderStatus", o.confirm_token_hash = $2 AS "token_matches?"
FROM orders o WHERE o.id = $1
