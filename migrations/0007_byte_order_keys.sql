-- The sale path's text keys compare byte by byte. Every order writes
-- index entries keyed by the email, the idempotency key, the buyer key and
-- its tickets' codes; under a libc collation (even C.UTF-8) each
-- comparison calls strcoll, a visible share of the batch statement's time.
-- These keys are identifiers, not prose: equality is byte equality under
-- any deterministic collation, and in UTF-8 byte order is code point order,
-- which is what C.UTF-8 sorts by anyway.
ALTER TABLE orders
    ALTER COLUMN email TYPE text COLLATE "C",
    ALTER COLUMN idempotency_key TYPE text COLLATE "C",
    ALTER COLUMN buyer_key TYPE text COLLATE "C";
ALTER TABLE tickets ALTER COLUMN code TYPE text COLLATE "C";
ALTER TABLE buyer_holdings ALTER COLUMN buyer_key TYPE text COLLATE "C";
ALTER TABLE event_buyer_holdings ALTER COLUMN buyer_key TYPE text COLLATE "C";

-- Redundant: orders_buyer_idempotency_key (email, idempotency_key) leads
-- with the email and serves every lookup by email; this one only cost an
-- index entry per order.
DROP INDEX orders_by_email;

-- lower() under "C" folds ASCII only: the check keeps folding as before,
-- under the database's own collation.
ALTER TABLE orders DROP CONSTRAINT orders_email_normalised;
ALTER TABLE orders ADD CONSTRAINT orders_email_normalised
    CHECK (email = lower(btrim(email COLLATE "default")) AND email LIKE '%_@_%');
