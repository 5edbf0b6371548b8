-- Issue 10: the transactional outbox. Every change of an order's state (and
-- of an event's, and of a ticket type's availability) writes a row here in
-- the transaction that makes the change, so a message exists exactly when
-- the change committed. The relay (src/outbox/) publishes the rows to
-- RabbitMQ and sets `published_at` once the broker has confirmed them;
-- rows published longer ago than the retention period are deleted.
--
-- No foreign keys: the outbox is a log of what happened, written on the hot
-- path, and never joined to decide anything.
CREATE TABLE outbox (
    -- The order rows were written in: the relay claims oldest first.
    position       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The message id consumers drop duplicates by.
    id             uuid NOT NULL DEFAULT gen_random_uuid(),
    kind           text NOT NULL CONSTRAINT outbox_kind_known CHECK (kind IN (
                       'order.created', 'order.cancelled', 'event.cancelled',
                       'ticket_type.sold_out', 'ticket_type.available_again')),
    event_id       uuid NOT NULL,
    order_id       uuid,
    ticket_type_id uuid,
    -- Per subject, increasing: for an order 1 (created) then 2 (cancelled);
    -- for a ticket type's availability its `availability_seq`; 1 for an
    -- event's cancellation.
    sequence       bigint NOT NULL,
    -- Ids and state only, never a secret (no cancel secret, no ticket code).
    payload        jsonb NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    published_at   timestamptz,
    CONSTRAINT outbox_id_unique UNIQUE (id)
);

-- What the relay claims: only the rows still to send, oldest first.
CREATE INDEX outbox_unpublished ON outbox (position) WHERE published_at IS NULL;

-- Sold out and available again: a ticket type's `remaining` reaching 0, or
-- leaving 0 while its sales are not halted (an event's cancellation restores
-- the stock of halted types: nothing is for sale again). One row per
-- transition, written by the statement that makes it, whichever it is (a
-- purchase or a batch, a cancellation, a capacity edit). BEFORE, so that the
-- row's own transition counter orders the messages of one ticket type.
ALTER TABLE ticket_types ADD COLUMN availability_seq bigint NOT NULL DEFAULT 0;

CREATE FUNCTION outbox_availability() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.availability_seq := OLD.availability_seq + 1;
    INSERT INTO outbox (kind, event_id, ticket_type_id, sequence, payload)
    VALUES (
        CASE WHEN NEW.remaining = 0 THEN 'ticket_type.sold_out'
             ELSE 'ticket_type.available_again' END,
        NEW.event_id, NEW.id, NEW.availability_seq,
        jsonb_build_object(
            'event_id', NEW.event_id, 'ticket_type_id', NEW.id,
            'remaining', NEW.remaining, 'capacity', NEW.capacity,
            'sequence', NEW.availability_seq));
    RETURN NEW;
END
$$;

CREATE TRIGGER ticket_types_availability_outbox
BEFORE UPDATE OF remaining ON ticket_types
FOR EACH ROW WHEN (
    (OLD.remaining > 0 AND NEW.remaining = 0)
    OR (OLD.remaining = 0 AND NEW.remaining > 0 AND NOT NEW.sales_halted)
)
EXECUTE FUNCTION outbox_availability();
