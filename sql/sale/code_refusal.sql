SELECT c.max_uses - c.used AS "left!", c.valid_from, c.valid_until,
       EXISTS (SELECT 1 FROM presale_code_ticket_types u
               WHERE u.code_id = c.id AND u.ticket_type_id = $1) AS "unlocks!"
FROM presale_codes c JOIN ticket_types t ON t.event_id = c.event_id
WHERE t.id = $1 AND c.code = $2
