UPDATE payments SET refund_attempts = refund_attempts + 1, refund_error = $2, refund_next_at = $3
WHERE order_id = $1 AND refund = 'due'
