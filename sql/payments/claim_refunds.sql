UPDATE payments p SET refund_next_at = $1 + interval '10 minutes'
FROM (SELECT order_id FROM payments
      WHERE refund = 'due' AND refund_next_at <= $1
      ORDER BY refund_next_at LIMIT $2
      FOR UPDATE SKIP LOCKED) due
WHERE p.order_id = due.order_id
RETURNING p.order_id, p.intent_id AS "intent_id!", p.refund_attempts
