-- A change of a ticket type's sale terms (its capacity, its limit per order
-- or per buyer) is announced on the channel of returned stock, so that the
-- Redis gate of every instance rebuilds that ticket type's counters at once
-- rather than at its next periodic reconcile: a raised limit is not refused
-- by Redis meanwhile, a lowered capacity not admitted. (The sold-out flags
-- also hear it and forget that type: harmless, the next purchase asks
-- Postgres.) The sale's own decrement changes none of these columns.
CREATE TRIGGER ticket_types_sale_terms_changed
AFTER UPDATE OF capacity, max_per_order, max_per_buyer ON ticket_types
FOR EACH ROW WHEN (
    NEW.capacity IS DISTINCT FROM OLD.capacity
    OR NEW.max_per_order IS DISTINCT FROM OLD.max_per_order
    OR NEW.max_per_buyer IS DISTINCT FROM OLD.max_per_buyer
)
EXECUTE FUNCTION notify_stock_returned();
