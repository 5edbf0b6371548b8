INSERT INTO outbox (kind, event_id, sequence, payload)
SELECT 'event.cancelled', e.id, 1,
       jsonb_build_object('event_id', e.id, 'status', e.status, 'cancelled_at', e.updated_at)
FROM events e WHERE e.id = $1 AND e.status = 'cancelled'
