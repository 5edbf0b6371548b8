SELECT id
FROM ticket_types
WHERE event_status = 'published'
  AND remaining > 0
  AND event_sale_opens_at <= now() + make_interval(secs => $1)
  AND coalesce(event_sale_closes_at, event_starts_at) > now()
ORDER BY event_sale_opens_at DESC
LIMIT $2
