-- A ticket type whose sale is published (a type added to a published
-- event, or its event published or its sale window moved) is announced, so
-- that the Redis gate of every instance counts its stock before the rush
-- rather than at its first purchase (src/sale/gate.rs, "Built ahead").
-- `ticket_types.event_*` are the event's copies (migrations/0004): its
-- publication reaches this table as an UPDATE of them. Delivered at commit.
-- The sale's own decrement changes none of these columns.
CREATE FUNCTION notify_sale_scheduled() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('stampede_sale_scheduled', NEW.id::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER ticket_types_sale_scheduled
AFTER INSERT OR UPDATE OF event_status, event_sale_opens_at, event_sale_closes_at, event_starts_at
ON ticket_types
FOR EACH ROW WHEN (
    NEW.event_status = 'published'
    AND coalesce(NEW.event_sale_closes_at, NEW.event_starts_at) > now()
)
EXECUTE FUNCTION notify_sale_scheduled();
