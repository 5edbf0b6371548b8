UPDATE event_buyer_holdings SET quantity = quantity - $3 WHERE event_id = $1 AND buyer_key = $2
