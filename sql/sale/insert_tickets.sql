INSERT INTO tickets (order_id, position) SELECT $1, generate_series(1, $2)
