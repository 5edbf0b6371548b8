UPDATE payments p SET checked_at = $1::timestamptz
FROM (SELECT p.order_id FROM payments p JOIN orders o ON o.id = p.order_id
      WHERE p.status = 'pending' AND p.intent_id IS NOT NULL
        AND ((p.checked_at IS NULL AND p.created_at < $1::timestamptz - $3::interval)
             OR (o.hold_expires_at < $1::timestamptz + interval '2 minutes'
                 AND (p.checked_at IS NULL OR p.checked_at < $1::timestamptz - interval '30 seconds')))
      ORDER BY o.hold_expires_at LIMIT $2
      FOR UPDATE OF p SKIP LOCKED) due
WHERE p.order_id = due.order_id
RETURNING p.intent_id AS "intent_id!"
