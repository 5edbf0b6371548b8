UPDATE payments p SET checked_at = $1
FROM (SELECT p.order_id FROM payments p JOIN orders o ON o.id = p.order_id
      WHERE p.status = 'failed' AND p.intent_id IS NOT NULL AND p.intent_closed_at IS NULL
        AND o.cancelled_at < $1::timestamptz - $3::interval
        AND (p.checked_at IS NULL OR p.checked_at < $1::timestamptz - interval '30 seconds')
      ORDER BY p.created_at LIMIT $2
      FOR UPDATE OF p SKIP LOCKED) due
WHERE p.order_id = due.order_id
RETURNING p.intent_id AS "intent_id!"
