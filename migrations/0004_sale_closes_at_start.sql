-- Time rules, and the sale window on the hot row.
--
-- 1. A sale without a close time closes when the event starts. `sale_open`
--    takes the event's start; it stays the SQL twin of SaleWindow::state in
--    src/domain/sale_window.rs (tests/sale_window.rs checks that they agree).
DROP FUNCTION sale_open(text, timestamptz, timestamptz, timestamptz);
CREATE FUNCTION sale_open(status text, opens_at timestamptz, closes_at timestamptz,
                          starts_at timestamptz, at timestamptz)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT status = 'published' AND opens_at <= at AND coalesce(closes_at, starts_at) > at
$$;

-- 2. What the sale's conditional UPDATE needs from the event, copied onto
--    each ticket type (the hot row). At Read Committed a purchase blocked on
--    the ticket type's row lock re-checks its WHERE clause against the new
--    version of that row only: a joined `events` row stays the version of
--    the statement's snapshot, so unpublishing or closing the sale while a
--    purchase waits would not stop it. Kept in sync by triggers, in the
--    transaction that changes the event; that UPDATE takes the ticket types'
--    row locks (waiting for purchases in flight to commit), and every later
--    purchase sees the new values. Lock order stays events, then ticket
--    types, as in cancel_event and the event edit. The copies are named
--    event_* so that no query joining the two tables becomes ambiguous.
ALTER TABLE ticket_types
    ADD COLUMN event_status         text,
    ADD COLUMN event_sale_opens_at  timestamptz,
    ADD COLUMN event_sale_closes_at timestamptz,
    ADD COLUMN event_starts_at      timestamptz;

UPDATE ticket_types t
SET event_status = e.status, event_sale_opens_at = e.sale_opens_at,
    event_sale_closes_at = e.sale_closes_at, event_starts_at = e.starts_at
FROM events e WHERE e.id = t.event_id;

ALTER TABLE ticket_types
    ALTER COLUMN event_status SET NOT NULL,
    ALTER COLUMN event_sale_opens_at SET NOT NULL,
    ALTER COLUMN event_starts_at SET NOT NULL;

CREATE FUNCTION ticket_types_copy_event_window() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    SELECT e.status, e.sale_opens_at, e.sale_closes_at, e.starts_at
    INTO NEW.event_status, NEW.event_sale_opens_at, NEW.event_sale_closes_at, NEW.event_starts_at
    FROM events e WHERE e.id = NEW.event_id;
    RETURN NEW;
END
$$;

CREATE TRIGGER ticket_types_event_window
BEFORE INSERT OR UPDATE OF event_id ON ticket_types
FOR EACH ROW EXECUTE FUNCTION ticket_types_copy_event_window();

CREATE FUNCTION events_push_window() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ticket_types
    SET event_status = NEW.status, event_sale_opens_at = NEW.sale_opens_at,
        event_sale_closes_at = NEW.sale_closes_at, event_starts_at = NEW.starts_at
    WHERE event_id = NEW.id;
    RETURN NULL;
END
$$;

-- Only when the window changes: editing a title does not touch the hot rows.
CREATE TRIGGER events_window_to_ticket_types
AFTER UPDATE ON events
FOR EACH ROW
WHEN (OLD.status IS DISTINCT FROM NEW.status
      OR OLD.sale_opens_at IS DISTINCT FROM NEW.sale_opens_at
      OR OLD.sale_closes_at IS DISTINCT FROM NEW.sale_closes_at
      OR OLD.starts_at IS DISTINCT FROM NEW.starts_at)
EXECUTE FUNCTION events_push_window();
