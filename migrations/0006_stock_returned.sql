-- Tickets coming back on sale (a cancellation, a capacity raised) are
-- announced, so that every instance clears its in-process sold-out flag
-- (src/sale/sold_out.rs). Delivered at commit, once per ticket type and
-- transaction. The sale's own decrement never fires it.
CREATE FUNCTION notify_stock_returned() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('stampede_stock_returned', NEW.id::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER ticket_types_stock_returned
AFTER UPDATE OF remaining ON ticket_types
FOR EACH ROW WHEN (NEW.remaining > OLD.remaining)
EXECUTE FUNCTION notify_stock_returned();
