UPDATE payments SET checked_at = $2
WHERE order_id = $1 AND intent_id IS NOT NULL
  AND (checked_at IS NULL OR checked_at < $2::timestamptz - interval '5 seconds')
RETURNING order_id
