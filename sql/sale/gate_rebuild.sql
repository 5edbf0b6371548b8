SELECT t.remaining, t.max_per_order, t.max_per_buyer,
       COALESCE(h.buyer_keys, ARRAY[]::text[]) AS "buyer_keys!",
       COALESCE(h.held, ARRAY[]::integer[]) AS "held!"
FROM ticket_types t
LEFT JOIN LATERAL (
    SELECT array_agg(b.buyer_key ORDER BY b.buyer_key) AS buyer_keys,
           array_agg(b.quantity ORDER BY b.buyer_key) AS held
    FROM buyer_holdings b
    WHERE b.ticket_type_id = t.id AND b.quantity > 0
) h ON true
WHERE t.id = $1
