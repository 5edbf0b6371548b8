SELECT DISTINCT buyer_key AS "buyer_key!" FROM orders
WHERE buyer_key = ANY($1::text[]) AND confirmed_at IS NOT NULL
