-- Issue 36: tickets in the buyer's inbox.
--
-- Confirmed and cancelled orders are mailed from the outbox rows that
-- exist already (`mail_sent` records each). What the outbox does not carry
-- is asked for here: a buyer's "find my tickets" (one mail listing the
-- links of their orders) and an organizer's resend of one order's tickets.
-- The mailer of any instance claims pending requests for a minute, sends
-- each and marks it sent, so a request is mailed once however many
-- instances run (twice only if a mailer dies between the SMTP server's
-- acceptance and its mark; both copies have the same Message-ID).
CREATE TABLE mail_requests (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    kind         text NOT NULL CONSTRAINT mail_requests_kind_known CHECK (kind IN ('lookup', 'resend')),
    -- The order whose tickets go again (a resend); none for a lookup.
    order_id     uuid REFERENCES orders (id) ON DELETE CASCADE,
    -- Normalised like orders.email: a lookup finds the orders of exactly it.
    email        text NOT NULL CONSTRAINT mail_requests_email_normalised
                 CHECK (email = lower(btrim(email)) AND email LIKE '%_@_%'),
    requested_at timestamptz NOT NULL DEFAULT now(),
    -- A mailer took it until then (a lease, not a lock held while it
    -- talks to the SMTP server); past it, another may.
    claimed_until timestamptz,
    sent_at      timestamptz,
    CONSTRAINT mail_requests_order_matches_kind CHECK ((kind = 'resend') = (order_id IS NOT NULL))
);

CREATE INDEX mail_requests_pending ON mail_requests (requested_at) WHERE sent_at IS NULL;
-- The per-address limit looks back over an address's recent requests.
CREATE INDEX mail_requests_by_email ON mail_requests (email, requested_at);
-- A lookup lists an address's orders through orders_by_email (0002): no
-- new index on the sale's hot table.
