-- Organizer accounts, API tokens, event ownership, and one row per ticket.

CREATE TABLE organizers (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    email         text NOT NULL
                  CONSTRAINT organizers_email_normalised CHECK (email = lower(btrim(email)) AND email LIKE '%_@_%'),
    -- PHC string (argon2id), never the password.
    password_hash text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT organizers_email_unique UNIQUE (email)
);

CREATE TABLE api_tokens (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    organizer_id uuid NOT NULL REFERENCES organizers (id) ON DELETE CASCADE,
    name         text NOT NULL CONSTRAINT api_tokens_name_length CHECK (char_length(name) BETWEEN 1 AND 100),
    -- SHA-256 of the token; the token itself is shown once and never stored.
    token_hash   bytea NOT NULL CONSTRAINT api_tokens_hash_unique UNIQUE,
    -- The first characters, so the organizer can tell tokens apart.
    prefix       text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);

CREATE INDEX api_tokens_by_organizer ON api_tokens (organizer_id, created_at);

-- Events created before accounts existed have no owner: buyers still see
-- them, no organizer can edit them.
ALTER TABLE events ADD COLUMN organizer_id uuid REFERENCES organizers (id) ON DELETE RESTRICT;
CREATE INDEX events_by_organizer ON events (organizer_id, starts_at);

-- Set when an event is cancelled, on the hot row itself: a purchase blocked
-- on that row re-checks its WHERE clause against the new version and sees
-- it, which a re-check of the joined events row would not.
ALTER TABLE ticket_types ADD COLUMN sales_halted boolean NOT NULL DEFAULT false;

CREATE TABLE tickets (
    id       uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    order_id uuid NOT NULL REFERENCES orders (id) ON DELETE CASCADE,
    position integer NOT NULL CONSTRAINT tickets_position_positive CHECK (position > 0),
    -- What the QR code holds: 122 random bits, unguessable.
    code     text NOT NULL DEFAULT upper(replace(gen_random_uuid()::text, '-', '')),
    CONSTRAINT tickets_code_unique UNIQUE (code),
    CONSTRAINT tickets_order_position_unique UNIQUE (order_id, position)
);

-- Orders written before tickets existed get theirs now.
INSERT INTO tickets (order_id, position)
SELECT o.id, g.n FROM orders o CROSS JOIN LATERAL generate_series(1, o.quantity) AS g (n);

CREATE INDEX orders_by_email ON orders (email);

-- Organizer browser sessions (tower-sessions' Postgres store, pointed here
-- so that the schema lives with the others).
CREATE TABLE sessions (
    id          text PRIMARY KEY,
    data        bytea NOT NULL,
    expiry_date timestamptz NOT NULL
);
CREATE INDEX sessions_by_expiry ON sessions (expiry_date);
