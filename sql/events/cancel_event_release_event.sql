UPDATE event_buyer_holdings SET quantity = 0 WHERE event_id = $1 AND quantity <> 0
