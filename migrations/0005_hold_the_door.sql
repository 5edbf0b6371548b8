-- Issue 7 (hold the door), items 9 and 4.

-- Idempotency keys: 16 to 200 characters of [A-Za-z0-9_-] (the application
-- refuses others with 422). Keys of orders written before stay valid.
ALTER TABLE orders DROP CONSTRAINT orders_idempotency_key_length;
ALTER TABLE orders ADD CONSTRAINT orders_idempotency_key_length
    CHECK (char_length(idempotency_key) BETWEEN 1 AND 200);

-- The buyer's cancel secret, stored as its SHA-256 only. NULL for orders
-- written before secrets existed: those cannot be cancelled by the buyer
-- (the organizer can still cancel the event).
ALTER TABLE orders ADD COLUMN cancel_secret_hash bytea;

-- Item 4: per-buyer limits count a folded buyer key (domain::BuyerKey: NFKC,
-- confusables skeleton, lower case, no +tag, Gmail without dots), not the
-- email as typed. The order keeps the email as given and records its key.
-- Orders written before have no key: their email (trimmed, lower-cased) is
-- their key, which is what their holdings were counted on.
ALTER TABLE orders ADD COLUMN buyer_key text;
ALTER TABLE buyer_holdings RENAME COLUMN email TO buyer_key;

-- An optional limit per buyer across all ticket types of an event.
ALTER TABLE events ADD COLUMN max_per_buyer integer
    CONSTRAINT events_max_per_buyer_positive CHECK (max_per_buyer IS NULL OR max_per_buyer > 0);

-- Tickets each buyer key holds per event, across its ticket types and all
-- live orders: one row per (event, buyer key), kept by the sale transaction
-- with a conditional upsert (whether or not the event has a limit, so that
-- a limit set later counts what was bought before).
CREATE TABLE event_buyer_holdings (
    event_id  uuid NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    buyer_key text NOT NULL,
    quantity  integer NOT NULL CONSTRAINT event_buyer_holdings_quantity_non_negative CHECK (quantity >= 0),
    PRIMARY KEY (event_id, buyer_key)
);

INSERT INTO event_buyer_holdings (event_id, buyer_key, quantity)
SELECT t.event_id, h.buyer_key, SUM(h.quantity)
FROM buyer_holdings h JOIN ticket_types t ON t.id = h.ticket_type_id
GROUP BY t.event_id, h.buyer_key;

-- Item 5: the public list is read a page at a time in (starts_at, id) order.
DROP INDEX events_published_by_start;
CREATE INDEX events_published_by_start ON events (starts_at, id) WHERE status = 'published';
