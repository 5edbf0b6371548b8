-- After an edit's writes (which lock every ticket type row of the event, as
-- each purchase locks its row before it reads the limits): a ticket type
-- whose lowered limit per buyer is below what one buyer already holds.
SELECT t.id, MAX(h.quantity) AS "held!"
FROM ticket_types t JOIN buyer_holdings h ON h.ticket_type_id = t.id
WHERE t.event_id = $1
GROUP BY t.id, t.max_per_buyer
HAVING MAX(h.quantity) > t.max_per_buyer
LIMIT 1
