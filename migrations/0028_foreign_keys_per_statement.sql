-- Issue 38: the five foreign keys of the sale's hot tables are checked once
-- per statement instead of once per row.
--
-- A foreign key is a row trigger: each row of an order batch (orders,
-- tickets, both holdings) queued and ran its own check of its parent, and
-- so did an order's presale code, NULL for most. The triggers below keep
-- the same rules for every writer, the engine and a hand-written statement
-- alike, set-wise: after each INSERT statement one query locks the distinct
-- parents its rows name (FOR KEY SHARE, the lock a foreign key takes, so a
-- concurrent DELETE of a parent waits for the inserting transaction and
-- then sees its rows) and fails unless it locked every one. The parents'
-- side is as before: a ticket type or a presale code used by an order
-- cannot be deleted; deleting a ticket type or an event takes its holdings
-- with it, deleting an order its tickets. Keys never change, on either
-- side. The errors keep the old constraints' names and SQLSTATE (23503),
-- which the app maps to its messages. tests/isolation/specs/foreign_keys.spec
-- proves the interleavings, tests/it/schema_keys.rs the hand-written rows.

ALTER TABLE orders DROP CONSTRAINT orders_ticket_type_id_fkey;
ALTER TABLE orders DROP CONSTRAINT orders_presale_code_id_fkey;
ALTER TABLE tickets DROP CONSTRAINT tickets_order_id_fkey;
ALTER TABLE buyer_holdings DROP CONSTRAINT buyer_holdings_ticket_type_id_fkey;
ALTER TABLE event_buyer_holdings DROP CONSTRAINT event_buyer_holdings_event_id_fkey;

-- The child's side: after an INSERT, every parent named is there, locked.
CREATE FUNCTION orphan_error(child text, constraint_name text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'insert or update on table "%" violates foreign key constraint "%"',
        child, constraint_name
        USING ERRCODE = 'foreign_key_violation', TABLE = child, CONSTRAINT = constraint_name;
END
$$;

CREATE FUNCTION orders_parents_exist() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT count(*) FROM (SELECT FROM ticket_types p
                               WHERE p.id IN (SELECT n.ticket_type_id FROM new_rows n)
                               FOR KEY SHARE OF p) locked)
       <> (SELECT count(DISTINCT n.ticket_type_id) FROM new_rows n) THEN
        PERFORM orphan_error('orders', 'orders_ticket_type_id_fkey');
    END IF;
    -- Most orders use no code: the check then reads no row.
    IF (SELECT count(*) FROM (SELECT FROM presale_codes p
                               WHERE p.id IN (SELECT n.presale_code_id FROM new_rows n
                                              WHERE n.presale_code_id IS NOT NULL)
                               FOR KEY SHARE OF p) locked)
       <> (SELECT count(DISTINCT n.presale_code_id) FROM new_rows n) THEN
        PERFORM orphan_error('orders', 'orders_presale_code_id_fkey');
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER orders_parents_exist AFTER INSERT ON orders
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION orders_parents_exist();

CREATE FUNCTION tickets_orders_exist() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT count(*) FROM (SELECT FROM orders p
                               WHERE p.id IN (SELECT n.order_id FROM new_rows n)
                               FOR KEY SHARE OF p) locked)
       <> (SELECT count(DISTINCT n.order_id) FROM new_rows n) THEN
        PERFORM orphan_error('tickets', 'tickets_order_id_fkey');
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER tickets_order_id_fkey AFTER INSERT ON tickets
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION tickets_orders_exist();

CREATE FUNCTION buyer_holdings_ticket_types_exist() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT count(*) FROM (SELECT FROM ticket_types p
                               WHERE p.id IN (SELECT n.ticket_type_id FROM new_rows n)
                               FOR KEY SHARE OF p) locked)
       <> (SELECT count(DISTINCT n.ticket_type_id) FROM new_rows n) THEN
        PERFORM orphan_error('buyer_holdings', 'buyer_holdings_ticket_type_id_fkey');
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER buyer_holdings_ticket_type_id_fkey AFTER INSERT ON buyer_holdings
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION buyer_holdings_ticket_types_exist();

CREATE FUNCTION event_buyer_holdings_events_exist() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT count(*) FROM (SELECT FROM events p
                               WHERE p.id IN (SELECT n.event_id FROM new_rows n)
                               FOR KEY SHARE OF p) locked)
       <> (SELECT count(DISTINCT n.event_id) FROM new_rows n) THEN
        PERFORM orphan_error('event_buyer_holdings', 'event_buyer_holdings_event_id_fkey');
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER event_buyer_holdings_event_id_fkey AFTER INSERT ON event_buyer_holdings
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION event_buyer_holdings_events_exist();

-- Keys never change: neither a child's reference nor a parent's id (the
-- triggers fire only for an UPDATE that names the column).
CREATE FUNCTION key_is_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'column "%" of table "%" cannot change', TG_ARGV[0], TG_TABLE_NAME
        USING ERRCODE = 'foreign_key_violation', TABLE = TG_TABLE_NAME;
END
$$;
CREATE TRIGGER orders_ticket_type_id_fixed BEFORE UPDATE OF ticket_type_id ON orders
    FOR EACH ROW WHEN (OLD.ticket_type_id IS DISTINCT FROM NEW.ticket_type_id)
    EXECUTE FUNCTION key_is_fixed('ticket_type_id');
CREATE TRIGGER tickets_order_id_fixed BEFORE UPDATE OF order_id ON tickets
    FOR EACH ROW WHEN (OLD.order_id IS DISTINCT FROM NEW.order_id)
    EXECUTE FUNCTION key_is_fixed('order_id');
CREATE TRIGGER buyer_holdings_ticket_type_id_fixed BEFORE UPDATE OF ticket_type_id ON buyer_holdings
    FOR EACH ROW WHEN (OLD.ticket_type_id IS DISTINCT FROM NEW.ticket_type_id)
    EXECUTE FUNCTION key_is_fixed('ticket_type_id');
CREATE TRIGGER event_buyer_holdings_event_id_fixed BEFORE UPDATE OF event_id ON event_buyer_holdings
    FOR EACH ROW WHEN (OLD.event_id IS DISTINCT FROM NEW.event_id)
    EXECUTE FUNCTION key_is_fixed('event_id');
CREATE TRIGGER orders_presale_code_id_fixed BEFORE UPDATE OF presale_code_id ON orders
    FOR EACH ROW WHEN (OLD.presale_code_id IS DISTINCT FROM NEW.presale_code_id)
    EXECUTE FUNCTION key_is_fixed('presale_code_id');
CREATE TRIGGER presale_codes_id_fixed BEFORE UPDATE OF id ON presale_codes
    FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id) EXECUTE FUNCTION key_is_fixed('id');
CREATE TRIGGER orders_id_fixed BEFORE UPDATE OF id ON orders
    FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id) EXECUTE FUNCTION key_is_fixed('id');
CREATE TRIGGER ticket_types_id_fixed BEFORE UPDATE OF id ON ticket_types
    FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id) EXECUTE FUNCTION key_is_fixed('id');
CREATE TRIGGER events_id_fixed BEFORE UPDATE OF id ON events
    FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id) EXECUTE FUNCTION key_is_fixed('id');

-- The parents' side, after a DELETE statement (each query reads the latest
-- committed rows, as a foreign key's own check does: a child inserted by a
-- transaction that locked the parent before the DELETE and has since
-- committed is seen). Under REPEATABLE READ a parent's DELETE would read
-- its own older snapshot and miss such a child, so it is refused there;
-- the app deletes in READ COMMITTED.
CREATE FUNCTION refuse_repeatable_read_delete() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('transaction_isolation') = 'repeatable read' THEN
        RAISE EXCEPTION 'delete from a parent of the sale''s tables runs in READ COMMITTED or SERIALIZABLE'
            USING ERRCODE = 'feature_not_supported';
    END IF;
END
$$;

CREATE FUNCTION ticket_types_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM refuse_repeatable_read_delete();
    IF EXISTS (SELECT 1 FROM orders o WHERE o.ticket_type_id IN (SELECT d.id FROM old_rows d)) THEN
        RAISE EXCEPTION 'update or delete on table "ticket_types" violates foreign key constraint "orders_ticket_type_id_fkey" on table "orders"'
            USING ERRCODE = 'foreign_key_violation', TABLE = 'orders',
                  CONSTRAINT = 'orders_ticket_type_id_fkey';
    END IF;
    DELETE FROM buyer_holdings h WHERE h.ticket_type_id IN (SELECT d.id FROM old_rows d);
    RETURN NULL;
END
$$;
CREATE TRIGGER ticket_types_deleted AFTER DELETE ON ticket_types
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT
    EXECUTE FUNCTION ticket_types_deleted();

CREATE FUNCTION presale_codes_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM refuse_repeatable_read_delete();
    IF EXISTS (SELECT 1 FROM orders o WHERE o.presale_code_id IN (SELECT d.id FROM old_rows d)) THEN
        RAISE EXCEPTION 'update or delete on table "presale_codes" violates foreign key constraint "orders_presale_code_id_fkey" on table "orders"'
            USING ERRCODE = 'foreign_key_violation', TABLE = 'orders',
                  CONSTRAINT = 'orders_presale_code_id_fkey';
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER presale_codes_deleted AFTER DELETE ON presale_codes
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT
    EXECUTE FUNCTION presale_codes_deleted();

CREATE FUNCTION orders_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM refuse_repeatable_read_delete();
    DELETE FROM tickets k WHERE k.order_id IN (SELECT d.id FROM old_rows d);
    RETURN NULL;
END
$$;
CREATE TRIGGER orders_deleted AFTER DELETE ON orders
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT
    EXECUTE FUNCTION orders_deleted();

CREATE FUNCTION events_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM refuse_repeatable_read_delete();
    DELETE FROM event_buyer_holdings h WHERE h.event_id IN (SELECT d.id FROM old_rows d);
    RETURN NULL;
END
$$;
CREATE TRIGGER events_deleted AFTER DELETE ON events
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT
    EXECUTE FUNCTION events_deleted();
