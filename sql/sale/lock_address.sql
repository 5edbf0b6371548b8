SELECT count(pg_advisory_xact_lock(s.key)) AS "locked!"
FROM (SELECT DISTINCT hashtextextended($1::uuid::text || '/' || a, 0) AS key
      FROM unnest($2::text[]) AS a ORDER BY key) s
