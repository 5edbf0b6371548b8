-- Issue 11, check-in at the door: staff links, redemptions, scan nonces.

-- A door link lets staff without an organizer account redeem the tickets of
-- one event during a time window. Its secret is 256 random bits shown once
-- to the organizer; only its SHA-256 is kept.
CREATE TABLE door_links (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    event_id    uuid NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    door        text NOT NULL CONSTRAINT door_links_door_length CHECK (char_length(door) BETWEEN 1 AND 60),
    secret_hash bytea NOT NULL CONSTRAINT door_links_secret_hash_unique UNIQUE,
    valid_from  timestamptz NOT NULL,
    valid_until timestamptz NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz,
    CONSTRAINT door_links_window_ordered CHECK (valid_until > valid_from)
);
CREATE INDEX door_links_by_event ON door_links (event_id, created_at);

-- A ticket is redeemed once: sql/checkin/redeem.sql sets these three only
-- where redeemed_at IS NULL. redeemed_seq is the redeeming transaction's
-- id (pg_current_xact_id()): the check-in list's cursor, read only below
-- the oldest transaction still running, so that a redemption committed
-- late cannot slip behind a cursor already handed out.
ALTER TABLE tickets
    ADD COLUMN redeemed_at   timestamptz,
    ADD COLUMN redeemed_door text,
    ADD COLUMN redeemed_seq  bigint,
    ADD CONSTRAINT tickets_redeemed_together CHECK (
        (redeemed_at IS NULL) = (redeemed_door IS NULL)
        AND (redeemed_at IS NULL) = (redeemed_seq IS NULL));
CREATE INDEX tickets_redeemed_by_seq ON tickets (redeemed_seq, id) WHERE redeemed_seq IS NOT NULL;

-- Each scan carries a nonce chosen by the door device; the first answer
-- given for it is kept, so a retried scan gets that answer again instead of
-- `already_redeemed`. Claimed (answer NULL) and answered in the redeem's
-- own transaction: a twin of the same nonce waits on the key, then reads.
CREATE TABLE check_in_scans (
    event_id      uuid NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    nonce         text COLLATE "C" NOT NULL CONSTRAINT check_in_scans_nonce_length CHECK (char_length(nonce) BETWEEN 16 AND 200),
    code          text COLLATE "C" NOT NULL,
    door          text NOT NULL,
    result        text CONSTRAINT check_in_scans_result_known
                  CHECK (result IN ('ok', 'already_redeemed', 'order_cancelled', 'wrong_event', 'unknown')),
    ticket_type   text,
    redeemed_at   timestamptz,
    redeemed_door text,
    scanned_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (event_id, nonce)
);
