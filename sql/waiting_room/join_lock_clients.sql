SELECT count(pg_advisory_xact_lock(s.key)) AS "locked!"
FROM (SELECT DISTINCT k AS key FROM unnest($1::int8[]) AS k ORDER BY key) s
