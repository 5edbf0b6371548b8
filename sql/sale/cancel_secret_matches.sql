SELECT coalesce(cancel_secret_hash = $2, false) AS "matches!"
FROM orders WHERE id = $1
