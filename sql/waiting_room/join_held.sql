SELECT c.client_hash AS "client_hash!",
       (SELECT count(*) FROM (SELECT 1 FROM queue_entries q
                              WHERE q.event_id = $1 AND q.client_hash = c.client_hash
                              LIMIT $3) held) AS "held!"
FROM (SELECT DISTINCT h AS client_hash FROM unnest($2::bytea[]) AS h) c
