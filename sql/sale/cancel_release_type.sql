UPDATE buyer_holdings SET quantity = quantity - $3 WHERE ticket_type_id = $1 AND buyer_key = $2
