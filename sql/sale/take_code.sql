UPDATE presale_codes c SET used = c.used + $3
FROM ticket_types t
WHERE t.id = $1 AND c.event_id = t.event_id AND c.code = $2
  AND c.used + $3 <= c.max_uses
  AND (c.valid_from IS NULL OR c.valid_from <= $4)
  AND (c.valid_until IS NULL OR $4 < c.valid_until)
  AND EXISTS (SELECT 1 FROM presale_code_ticket_types u
              WHERE u.code_id = c.id AND u.ticket_type_id = $1)
RETURNING c.id
