-- Issue 13: held orders, confirmed from the buyer's mailbox.
--
-- Per event, the organizer chooses: orders are confirmed at once (NULL), or
-- held for `hold_seconds` until the buyer follows the link mailed to them.
-- A held order takes its stock and the buyer's limit at once, exactly as a
-- sale does (the same statements); it has no tickets until it is confirmed.
-- An expired hold gives both back, exactly once (src/sale/holds.rs), and is
-- cancelled with the reason `expired`: live orders stay exactly those not
-- cancelled (held or confirmed), as every invariant check counts them.
ALTER TABLE events ADD COLUMN hold_seconds integer
    CONSTRAINT events_hold_seconds_range CHECK (hold_seconds IS NULL OR hold_seconds BETWEEN 1 AND 86400);

ALTER TABLE orders DROP CONSTRAINT orders_status_known;
ALTER TABLE orders ADD CONSTRAINT orders_status_known
    CHECK (status IN ('held', 'confirmed', 'cancelled'));
ALTER TABLE orders
    ADD COLUMN hold_expires_at timestamptz,
    -- SHA-256 of the confirmation token; the token itself is only in the mail.
    ADD COLUMN confirm_token_hash bytea,
    ADD COLUMN confirmed_at timestamptz,
    -- Why a cancelled order was cancelled, where it is not the buyer's or
    -- the organizer's doing: `expired`, a hold not confirmed in time.
    ADD COLUMN cancel_reason text,
    ADD CONSTRAINT orders_cancel_reason_known CHECK (cancel_reason IS NULL OR cancel_reason = 'expired'),
    ADD CONSTRAINT orders_cancel_reason_when_cancelled CHECK (cancel_reason IS NULL OR status = 'cancelled'),
    ADD CONSTRAINT orders_held_until CHECK (status <> 'held' OR hold_expires_at IS NOT NULL),
    ADD CONSTRAINT orders_held_has_token CHECK (hold_expires_at IS NULL OR confirm_token_hash IS NOT NULL);

-- What the sweepers claim, oldest expiry first; and the held stock of a
-- ticket type, for its page ("in baskets"). Only held rows are indexed, so
-- an order confirmed at once costs neither index anything.
CREATE INDEX orders_holds_due ON orders (hold_expires_at) WHERE status = 'held';
CREATE INDEX orders_holds_by_type ON orders (ticket_type_id) WHERE status = 'held';

ALTER TABLE outbox DROP CONSTRAINT outbox_kind_known;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_known CHECK (kind IN (
    'order.created', 'order.confirmed', 'order.expired', 'order.cancelled', 'event.cancelled',
    'ticket_type.sold_out', 'ticket_type.available_again'));

ALTER TABLE webhook_endpoints DROP CONSTRAINT webhook_endpoints_event_types_known;
ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_event_types_known CHECK (
    cardinality(event_types) > 0 AND event_types <@ ARRAY[
        'order.created', 'order.confirmed', 'order.expired', 'order.cancelled',
        'event.cancelled', 'ticket_type.sold_out', 'ticket_type.available_again']::text[]);

-- The mailer is a third consumer of the outbox (src/mail/). It starts at
-- the end of the log: nothing written before holds existed needs a mail.
ALTER TABLE outbox_cursors DROP CONSTRAINT outbox_cursor_known;
ALTER TABLE outbox_cursors ADD CONSTRAINT outbox_cursor_known
    CHECK (consumer IN ('amqp', 'webhooks', 'mail'));
INSERT INTO outbox_cursors (consumer, xid, position)
SELECT 'mail', pg_current_xact_id(), coalesce((SELECT max(position) FROM outbox), 0);

-- One row per mail the SMTP server accepted, by the outbox message that
-- asked for it: a mail already sent is not sent again when a round is
-- repeated (after a crash, or by another instance).
CREATE TABLE mail_sent (
    message_id uuid PRIMARY KEY,
    order_id   uuid,
    recipient  text NOT NULL,
    sent_at    timestamptz NOT NULL DEFAULT now()
);
