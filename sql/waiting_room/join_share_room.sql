SELECT w.enabled AND e.status = 'published' AS "open!", w.shuffled_at
FROM waiting_rooms w JOIN events e ON e.id = w.event_id
WHERE w.event_id = $1
FOR SHARE OF w
