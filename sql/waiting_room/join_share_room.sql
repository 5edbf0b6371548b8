SELECT event_id FROM waiting_rooms WHERE event_id = $1 FOR SHARE
