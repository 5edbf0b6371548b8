-- Issue 38: the statement-level foreign-key checks of 0028 look each parent
-- up by its primary key, whatever the plan.
--
-- PL/pgSQL keeps a query's plan for the session, and a query over a
-- transition table is planned once, with the row count of the first
-- statement that fired it. A connection whose first batch was large kept a
-- hash join over all of `orders` for every later batch of tickets: a scan
-- of the whole table per batch (6.8 ms a batch on a table of 40,000 orders,
-- growing with it), which tripled the sale's latency at a steady rate. A
-- LATERAL lookup per distinct parent can only be planned as an index scan
-- per parent, so a check costs what its batch holds, not what the table
-- does. The rules are unchanged: the same parents are locked FOR KEY SHARE
-- and the same errors raised.

CREATE OR REPLACE FUNCTION orders_parents_exist() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT count(*) FROM (SELECT DISTINCT n.ticket_type_id FROM new_rows n) named,
               LATERAL (SELECT FROM ticket_types p WHERE p.id = named.ticket_type_id
                        FOR KEY SHARE OF p) locked)
       <> (SELECT count(DISTINCT n.ticket_type_id) FROM new_rows n) THEN
        PERFORM orphan_error('orders', 'orders_ticket_type_id_fkey');
    END IF;
    -- Most orders use no code: the check then reads no row.
    IF (SELECT count(*) FROM (SELECT DISTINCT n.presale_code_id FROM new_rows n
                              WHERE n.presale_code_id IS NOT NULL) named,
               LATERAL (SELECT FROM presale_codes p WHERE p.id = named.presale_code_id
                        FOR KEY SHARE OF p) locked)
       <> (SELECT count(DISTINCT n.presale_code_id) FROM new_rows n) THEN
        PERFORM orphan_error('orders', 'orders_presale_code_id_fkey');
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION tickets_orders_exist() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT count(*) FROM (SELECT DISTINCT n.order_id FROM new_rows n) named,
               LATERAL (SELECT FROM orders p WHERE p.id = named.order_id
                        FOR KEY SHARE OF p) locked)
       <> (SELECT count(DISTINCT n.order_id) FROM new_rows n) THEN
        PERFORM orphan_error('tickets', 'tickets_order_id_fkey');
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION buyer_holdings_ticket_types_exist() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT count(*) FROM (SELECT DISTINCT n.ticket_type_id FROM new_rows n) named,
               LATERAL (SELECT FROM ticket_types p WHERE p.id = named.ticket_type_id
                        FOR KEY SHARE OF p) locked)
       <> (SELECT count(DISTINCT n.ticket_type_id) FROM new_rows n) THEN
        PERFORM orphan_error('buyer_holdings', 'buyer_holdings_ticket_type_id_fkey');
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION event_buyer_holdings_events_exist() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT count(*) FROM (SELECT DISTINCT n.event_id FROM new_rows n) named,
               LATERAL (SELECT FROM events p WHERE p.id = named.event_id
                        FOR KEY SHARE OF p) locked)
       <> (SELECT count(DISTINCT n.event_id) FROM new_rows n) THEN
        PERFORM orphan_error('event_buyer_holdings', 'event_buyer_holdings_event_id_fkey');
    END IF;
    RETURN NULL;
END
$$;
