-- Issue 36: each event in its own time.
--
-- Instants stay `timestamptz`; the zone only says how they read to people
-- and how an organizer's local times are understood (src/domain/zone.rs).
-- The app checks the name against its zone database; here only its shape.
-- Every event before this was typed and shown in UTC, so that is theirs.
ALTER TABLE events ADD COLUMN time_zone text NOT NULL DEFAULT 'UTC'
    CONSTRAINT events_time_zone_name CHECK (time_zone ~ '^[A-Za-z0-9_+/-]{1,64}$');
