SELECT c.id, c.code, c.max_uses - c.used AS "left!", c.valid_from, c.valid_until,
       EXISTS (SELECT 1 FROM presale_code_ticket_types u
               WHERE u.code_id = c.id AND u.ticket_type_id = $2) AS "unlocks!"
FROM presale_codes c
WHERE c.event_id = $1 AND c.code = ANY($3)
ORDER BY c.id
FOR UPDATE
