SELECT event_id, remaining, max_per_order, max_per_buyer, sales_halted, price_minor, currency,
       hidden
FROM ticket_types WHERE id = $1 FOR UPDATE
