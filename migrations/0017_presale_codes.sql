-- Issue 13: presale codes. An organizer gives codes to a fan club (or any
-- group); a code unlocks some ticket types of its event during its window,
-- for a number of tickets in all. Its uses are enforced like stock: the
-- sale transaction's conditional `UPDATE presale_codes SET used = used + n
-- WHERE used + n <= max_uses`, on the code's own row; a cancelled or expired
-- order gives its tickets' uses back exactly once (src/sale/).
CREATE TABLE presale_codes (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    event_id    uuid NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    -- Upper case letters, digits and dashes (domain::PresaleCode).
    code        text NOT NULL CONSTRAINT presale_codes_code_format CHECK (code ~ '^[A-Z0-9-]{4,40}$'),
    -- Counted in tickets.
    max_uses    integer NOT NULL CONSTRAINT presale_codes_max_uses_positive CHECK (max_uses > 0),
    used        integer NOT NULL DEFAULT 0,
    valid_from  timestamptz,
    valid_until timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT presale_codes_used_within CHECK (used BETWEEN 0 AND max_uses),
    CONSTRAINT presale_codes_window_ordered CHECK (valid_from IS NULL OR valid_until IS NULL OR valid_until > valid_from),
    CONSTRAINT presale_codes_unique_in_event UNIQUE (event_id, code)
);

-- The ticket types a code unlocks.
CREATE TABLE presale_code_ticket_types (
    code_id        uuid NOT NULL REFERENCES presale_codes (id) ON DELETE CASCADE,
    ticket_type_id uuid NOT NULL REFERENCES ticket_types (id) ON DELETE CASCADE,
    PRIMARY KEY (code_id, ticket_type_id)
);
CREATE INDEX presale_code_ticket_types_by_type ON presale_code_ticket_types (ticket_type_id);

-- A hidden ticket type is not shown (pages, API) and not sold without a
-- code that unlocks it.
ALTER TABLE ticket_types ADD COLUMN hidden boolean NOT NULL DEFAULT false;

-- The code an order was bought with: its uses come back with the order.
ALTER TABLE orders ADD COLUMN presale_code_id uuid REFERENCES presale_codes (id) ON DELETE RESTRICT;
