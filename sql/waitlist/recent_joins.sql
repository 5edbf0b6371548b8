-- An address's joins since $2 on every list, and when the oldest of them
-- was made (it is the first to stop counting).
SELECT count(*) AS "joins!", min(created_at) AS oldest
FROM waitlist_entries
WHERE buyer_key = $1 AND created_at > $2
