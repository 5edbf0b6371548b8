-- The Redis gate's build-ahead scan (sql/sale/gate_ahead.sql) runs at every
-- reconcile of every instance. Its selective condition is "not closed yet":
-- past sales pile up forever, current and coming ones stay few. None of
-- these columns changes when a ticket sells, so the hot row's updates stay
-- HOT (do not index `remaining` here).
CREATE INDEX ticket_types_published_until
    ON ticket_types ((coalesce(event_sale_closes_at, event_starts_at)))
    WHERE event_status = 'published';
