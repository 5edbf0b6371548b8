-- Stampede core schema. Postgres is the only source of truth for stock.
-- Constraints are named so that violations can be mapped to clear messages.

CREATE TABLE events (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    title          text NOT NULL CONSTRAINT events_title_length CHECK (char_length(title) BETWEEN 1 AND 200),
    description    text NOT NULL DEFAULT '' CONSTRAINT events_description_length CHECK (char_length(description) <= 10000),
    venue          text NOT NULL CONSTRAINT events_venue_length CHECK (char_length(venue) BETWEEN 1 AND 200),
    starts_at      timestamptz NOT NULL,
    sale_opens_at  timestamptz NOT NULL,
    sale_closes_at timestamptz,
    status         text NOT NULL DEFAULT 'draft'
                   CONSTRAINT events_status_known CHECK (status IN ('draft', 'published', 'cancelled')),
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT events_sale_window_ordered CHECK (sale_closes_at IS NULL OR sale_closes_at > sale_opens_at)
);

CREATE INDEX events_published_by_start ON events (starts_at) WHERE status = 'published';

CREATE TABLE ticket_types (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    event_id      uuid NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    position      integer NOT NULL DEFAULT 0,
    name          text NOT NULL CONSTRAINT ticket_types_name_length CHECK (char_length(name) BETWEEN 1 AND 100),
    price_minor   bigint NOT NULL CONSTRAINT ticket_types_price_non_negative CHECK (price_minor >= 0),
    currency      text NOT NULL CONSTRAINT ticket_types_currency_code CHECK (currency ~ '^[A-Z]{3}$'),
    capacity      integer NOT NULL CONSTRAINT ticket_types_capacity_non_negative CHECK (capacity >= 0),
    -- The hot row of the on-sale: decremented by the conditional UPDATE in src/sale/.
    remaining     integer NOT NULL,
    max_per_order integer NOT NULL CONSTRAINT ticket_types_max_per_order_positive CHECK (max_per_order > 0),
    max_per_buyer integer NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ticket_types_remaining_non_negative CHECK (remaining >= 0),
    CONSTRAINT ticket_types_remaining_within_capacity CHECK (remaining <= capacity),
    CONSTRAINT ticket_types_buyer_limit_covers_order CHECK (max_per_buyer >= max_per_order)
);

CREATE INDEX ticket_types_by_event ON ticket_types (event_id, position);

CREATE TABLE orders (
    -- Public id: random (v4), never a serial, so order URLs cannot be guessed.
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    ticket_type_id  uuid NOT NULL REFERENCES ticket_types (id) ON DELETE RESTRICT,
    -- Normalised (trimmed, lower-cased) by the application before it gets here.
    email           text NOT NULL CONSTRAINT orders_email_normalised CHECK (email = lower(btrim(email)) AND email LIKE '%_@_%'),
    quantity        integer NOT NULL CONSTRAINT orders_quantity_positive CHECK (quantity > 0),
    status          text NOT NULL DEFAULT 'confirmed'
                    CONSTRAINT orders_status_known CHECK (status IN ('confirmed', 'cancelled')),
    -- Price at the moment of sale, so later price edits do not rewrite history.
    unit_price_minor bigint NOT NULL CONSTRAINT orders_unit_price_non_negative CHECK (unit_price_minor >= 0),
    currency        text NOT NULL,
    idempotency_key text NOT NULL CONSTRAINT orders_idempotency_key_length CHECK (char_length(idempotency_key) BETWEEN 1 AND 128),
    created_at      timestamptz NOT NULL DEFAULT now(),
    cancelled_at    timestamptz,
    CONSTRAINT orders_buyer_idempotency_key UNIQUE (email, idempotency_key),
    CONSTRAINT orders_cancelled_at_matches_status CHECK ((status = 'cancelled') = (cancelled_at IS NOT NULL))
);

CREATE INDEX orders_by_ticket_type ON orders (ticket_type_id, created_at);

-- Tickets held by each buyer per ticket type, across all live orders.
-- One row per (ticket type, buyer): the sale increments it with a conditional
-- upsert, so concurrent purchases by one buyer serialise on this row and the
-- per-buyer limit holds without reading in the application first.
CREATE TABLE buyer_holdings (
    ticket_type_id uuid NOT NULL REFERENCES ticket_types (id) ON DELETE CASCADE,
    email          text NOT NULL,
    quantity       integer NOT NULL CONSTRAINT buyer_holdings_quantity_non_negative CHECK (quantity >= 0),
    PRIMARY KEY (ticket_type_id, email)
);
