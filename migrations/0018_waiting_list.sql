-- Issue 13: a waiting list per ticket type.
--
-- A buyer joins a sold-out ticket type's list with an email address, which
-- they confirm from the mail the outbox sends (`waitlist.joined`); only
-- then do they have a place in line (`position`, from a sequence, so the
-- line is the order in which places were confirmed). Stock that comes back
-- (a cancel, an expired hold, a raised capacity) is offered to the first
-- person in line as a held order, in the very transaction that frees it
-- (src/db/waitlist/offers.rs): the tickets are never on sale in between.
CREATE SEQUENCE waitlist_position;

CREATE TABLE waitlist_entries (
    id             uuid PRIMARY KEY,
    ticket_type_id uuid NOT NULL REFERENCES ticket_types (id) ON DELETE CASCADE,
    email          text COLLATE "C" NOT NULL,
    -- The folded email (domain::BuyerKey): one place per buyer and type, and
    -- the buyer's limits are checked on it when an offer is made.
    buyer_key      text COLLATE "C" NOT NULL,
    quantity       integer NOT NULL CONSTRAINT waitlist_quantity_positive CHECK (quantity > 0),
    -- unconfirmed: the mail is out; waiting: in line; offered: a held order
    -- was made (`order_id`); passed: skipped, the buyer already holds their
    -- limit; left: the buyer left the list; closed: the event was cancelled.
    status         text NOT NULL DEFAULT 'unconfirmed' CONSTRAINT waitlist_status_known
        CHECK (status IN ('unconfirmed', 'waiting', 'offered', 'passed', 'left', 'closed')),
    -- SHA-256 of the token in the mail (derived from the id with the
    -- confirmation key): it confirms the place, and later the offer.
    token_hash     bytea NOT NULL,
    position       bigint,
    order_id       uuid REFERENCES orders (id) ON DELETE SET NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    confirmed_at   timestamptz,
    offered_at     timestamptz,
    CONSTRAINT waitlist_in_line_has_position CHECK (status IN ('unconfirmed', 'left', 'closed') OR position IS NOT NULL),
    CONSTRAINT waitlist_offered_has_order CHECK (status <> 'offered' OR offered_at IS NOT NULL)
);
-- One open place per buyer and ticket type.
CREATE UNIQUE INDEX waitlist_one_place ON waitlist_entries (ticket_type_id, buyer_key)
    WHERE status IN ('unconfirmed', 'waiting');
-- The line itself: who is next.
CREATE INDEX waitlist_line ON waitlist_entries (ticket_type_id, position) WHERE status = 'waiting';
CREATE INDEX waitlist_by_order ON waitlist_entries (order_id) WHERE order_id IS NOT NULL;

-- The organizer's switch: offers are made automatically unless turned off
-- (the list stays, and stock that comes back goes on sale).
ALTER TABLE events ADD COLUMN waitlist_offers boolean NOT NULL DEFAULT true;

ALTER TABLE outbox DROP CONSTRAINT outbox_kind_known;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_known CHECK (kind IN (
    'order.created', 'order.confirmed', 'order.expired', 'order.cancelled', 'event.cancelled',
    'ticket_type.sold_out', 'ticket_type.available_again', 'waitlist.joined'));

-- A mail may be about a waiting list entry rather than an order.
ALTER TABLE mail_sent ADD COLUMN waitlist_entry_id uuid;
