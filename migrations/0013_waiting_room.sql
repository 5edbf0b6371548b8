-- The waiting room (issue 12): per event, off by default. A row exists only
-- for events whose organizer saved the settings; no row means no room.
CREATE TABLE waiting_rooms (
    event_id             uuid PRIMARY KEY REFERENCES events (id) ON DELETE CASCADE,
    enabled              boolean NOT NULL DEFAULT false,
    -- The pre-queue opens this long before the sale.
    prequeue_minutes     integer NOT NULL DEFAULT 15
                         CONSTRAINT waiting_rooms_prequeue_minutes_range CHECK (prequeue_minutes BETWEEN 0 AND 1440),
    -- Buyers admitted per minute, and/or a cap on buyers admitted whose pass
    -- is neither spent nor expired; at least one of them.
    admit_per_minute     integer CONSTRAINT waiting_rooms_admit_per_minute_positive CHECK (admit_per_minute > 0),
    max_active           integer CONSTRAINT waiting_rooms_max_active_positive CHECK (max_active > 0),
    pass_minutes         integer NOT NULL DEFAULT 10
                         CONSTRAINT waiting_rooms_pass_minutes_range CHECK (pass_minutes BETWEEN 1 AND 1440),
    paused               boolean NOT NULL DEFAULT false,
    -- 32 random bytes, drawn once; its SHA-256 is published as the
    -- commitment before anyone joins, the seed itself only after the shuffle.
    seed                 bytea NOT NULL CONSTRAINT waiting_rooms_seed_length CHECK (octet_length(seed) = 32),
    seed_sha256          bytea NOT NULL GENERATED ALWAYS AS (sha256(seed)) STORED,
    -- Set by the one transaction that ordered the pre-queue.
    shuffled_at          timestamptz,
    -- The admission token bucket: credit accrues from this instant.
    admit_clock          timestamptz,
    CONSTRAINT waiting_rooms_admission_set CHECK (admit_per_minute IS NOT NULL OR max_active IS NOT NULL)
);

-- One buyer's place. The id is random (v4) and public once the pre-queue
-- is published; holding it proves nothing: the buyer's cookie carries it
-- with a MAC under the server's key.
CREATE TABLE queue_entries (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    event_id        uuid NOT NULL REFERENCES waiting_rooms (event_id) ON DELETE CASCADE,
    -- Arrival order: later arrivals are served by it.
    seq             bigint GENERATED ALWAYS AS IDENTITY,
    joined_at       timestamptz NOT NULL,
    -- A keyed hash of the client address (IPv4, or IPv6 /64): for the cap on
    -- entries per address, without storing addresses.
    client_hash     bytea NOT NULL,
    -- 1..n for the pre-queue, from the shuffle; NULL for later arrivals,
    -- who come after the whole pre-queue in `seq` order.
    position        bigint,
    admitted_at     timestamptz,
    pass_expires_at timestamptz,
    CONSTRAINT queue_entries_pass_with_admission CHECK ((admitted_at IS NULL) = (pass_expires_at IS NULL))
);

-- The admission order of those still waiting (ASC NULLS LAST: pre-queue first).
CREATE INDEX queue_entries_waiting ON queue_entries (event_id, position, seq) WHERE admitted_at IS NULL;
CREATE INDEX queue_entries_admitted ON queue_entries (event_id, pass_expires_at) WHERE admitted_at IS NOT NULL;
CREATE INDEX queue_entries_by_client ON queue_entries (event_id, client_hash);

-- A pass buys once: the order that spends it names its entry, in the sale's
-- own transaction. Partial, so orders of events without a room cost nothing.
ALTER TABLE orders ADD COLUMN queue_entry_id uuid;
CREATE UNIQUE INDEX orders_queue_entry_once ON orders (queue_entry_id) WHERE queue_entry_id IS NOT NULL;
