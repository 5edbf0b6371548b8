-- The organizer API's incremental sync (`modified_since`, issue 11): every
-- order carries the time of its last change. Inserts take the default;
-- every UPDATE (a cancellation by the buyer, the organizer or the event's
-- cancellation, and whatever comes later) moves it through the trigger, so
-- no code path can forget it. Orders are only inserted on the sale path, so
-- the trigger costs the sale nothing.
ALTER TABLE orders ADD COLUMN updated_at timestamptz;
UPDATE orders SET updated_at = COALESCE(cancelled_at, created_at);
ALTER TABLE orders ALTER COLUMN updated_at SET DEFAULT now(),
                   ALTER COLUMN updated_at SET NOT NULL;

CREATE FUNCTION orders_touch() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- Never backwards: a change sorts after the order's previous state.
    NEW.updated_at := greatest(now(), OLD.updated_at);
    RETURN NEW;
END
$$;

CREATE TRIGGER orders_touch
BEFORE UPDATE ON orders
FOR EACH ROW EXECUTE FUNCTION orders_touch();

-- The API's order list: keyset pagination on (updated_at, id) per ticket type.
CREATE INDEX orders_by_ticket_type_updated ON orders (ticket_type_id, updated_at, id);
