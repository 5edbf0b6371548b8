-- Issue 35: paid tickets through Stripe.
--
-- An order of a ticket type with a price is held (the holds of 0016) for
-- the event's time to pay, `pay_seconds`, and confirmed by Stripe's word
-- that its payment succeeded (src/payments/). The payment is one row per
-- order, so a second PaymentIntent is never made for an order.
ALTER TABLE events ADD COLUMN pay_seconds integer NOT NULL DEFAULT 900
    CONSTRAINT events_pay_seconds_range CHECK (pay_seconds BETWEEN 120 AND 86400);
-- Who takes the money for a ticket with a price: Stripe, through Stampede,
-- or the organizer (at the door, by invoice), as every event did before
-- this migration: their sales go on as they were. The app sets it for
-- every event it saves (Stripe unless the organizer chooses otherwise).
ALTER TABLE events ADD COLUMN payment text NOT NULL DEFAULT 'offline'
    CONSTRAINT events_payment_known CHECK (payment IN ('stripe', 'offline'));

CREATE TABLE payments (
    order_id       uuid PRIMARY KEY REFERENCES orders (id) ON DELETE RESTRICT,
    -- Stripe's PaymentIntent; NULL while the first call to make it runs.
    intent_id      text UNIQUE,
    client_secret  text,
    -- While one request makes the intent (src/payments/intent.rs).
    creating_until timestamptz,
    amount_minor   bigint NOT NULL CONSTRAINT payments_amount_positive CHECK (amount_minor > 0),
    currency       text NOT NULL CONSTRAINT payments_currency_code CHECK (currency ~ '^[A-Z]{3}$'),
    -- pending: not paid (yet); succeeded: Stripe captured the money;
    -- failed: the order ended before a payment came (a late one may still).
    status         text NOT NULL DEFAULT 'pending'
                   CONSTRAINT payments_status_known CHECK (status IN ('pending', 'succeeded', 'failed')),
    succeeded_at   timestamptz,
    -- A refund, written in the transaction that ends the order (the
    -- trigger below) or settles a payment too late, and made by the
    -- refunder (src/payments/refunds.rs): due, then done.
    refund         text CONSTRAINT payments_refund_known CHECK (refund IN ('due', 'done')),
    refund_reason  text CONSTRAINT payments_refund_reason_known
                   CHECK (refund_reason IN ('cancelled', 'event_cancelled', 'expired', 'late_sold_out')),
    refund_id      text,
    refund_attempts integer NOT NULL DEFAULT 0,
    refund_next_at timestamptz,
    refund_error   text,
    refunded_at    timestamptz,
    -- When the reconciler last asked Stripe about this payment.
    checked_at     timestamptz,
    -- The intent of an order that ended unpaid, cancelled at Stripe: a pay
    -- page left open cannot pay it any more.
    intent_closed_at timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT payments_succeeded_when CHECK ((status = 'succeeded') = (succeeded_at IS NOT NULL)),
    CONSTRAINT payments_refund_only_of_money CHECK (refund IS NULL OR status = 'succeeded'),
    CONSTRAINT payments_refund_has_reason CHECK ((refund IS NULL) = (refund_reason IS NULL)),
    CONSTRAINT payments_refunded_when CHECK ((refund = 'done') = (refunded_at IS NOT NULL))
);

-- What the refunder claims, and what the reconciler asks Stripe about.
CREATE INDEX payments_refunds_due ON payments (refund_next_at) WHERE refund = 'due';
CREATE INDEX payments_unsettled ON payments (created_at) WHERE status <> 'succeeded';

-- An order that ends keeps no money: a captured payment of a cancelled
-- order (by the buyer, the organizer, the event's cancel) becomes a refund
-- due in the same transaction, whichever statement cancelled it; a payment
-- still pending is marked failed (a late success is settled by
-- src/payments/settle.rs, which takes the stock again or refunds).
CREATE FUNCTION payments_on_order_end() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE payments p
    SET refund = 'due', refund_next_at = now(),
        refund_reason = CASE WHEN NEW.cancel_reason = 'expired' THEN 'expired'
                             WHEN EXISTS (SELECT 1 FROM ticket_types t JOIN events e ON e.id = t.event_id
                                          WHERE t.id = NEW.ticket_type_id AND e.status = 'cancelled')
                             THEN 'event_cancelled'
                             ELSE 'cancelled' END
    WHERE p.order_id = NEW.id AND p.status = 'succeeded' AND p.refund IS NULL;
    UPDATE payments p SET status = 'failed' WHERE p.order_id = NEW.id AND p.status = 'pending';
    RETURN NULL;
END $$;

CREATE TRIGGER orders_end_payment AFTER UPDATE OF status ON orders
    FOR EACH ROW WHEN (NEW.status = 'cancelled' AND OLD.status <> 'cancelled')
    EXECUTE FUNCTION payments_on_order_end();

ALTER TABLE outbox DROP CONSTRAINT outbox_kind_known;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_known CHECK (kind IN (
    'order.created', 'order.confirmed', 'order.expired', 'order.cancelled', 'event.cancelled',
    'ticket_type.sold_out', 'ticket_type.available_again', 'waitlist.joined',
    'order.paid', 'order.refunded'));

ALTER TABLE webhook_endpoints DROP CONSTRAINT webhook_endpoints_event_types_known;
ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_event_types_known CHECK (
    cardinality(event_types) > 0 AND event_types <@ ARRAY[
        'order.created', 'order.confirmed', 'order.expired', 'order.cancelled',
        'event.cancelled', 'ticket_type.sold_out', 'ticket_type.available_again',
        'order.paid', 'order.refunded']::text[]);

-- Prices are now in each currency's own minor unit (src/domain/format.rs):
-- before, every currency was stored in hundredths. Yen, won and the other
-- zero-decimal currencies had 100 stored per unit; the three-decimal
-- dinars and rials 100 per unit where they need 1,000.
UPDATE ticket_types SET price_minor = round(price_minor / 100.0)
WHERE currency IN ('BIF', 'CLP', 'DJF', 'GNF', 'JPY', 'KMF', 'KRW', 'MGA', 'PYG', 'RWF', 'UGX',
                   'VND', 'VUV', 'XAF', 'XOF', 'XPF');
UPDATE ticket_types SET price_minor = price_minor * 10
WHERE currency IN ('BHD', 'JOD', 'KWD', 'OMR', 'TND');
UPDATE orders SET unit_price_minor = round(unit_price_minor / 100.0)
WHERE currency IN ('BIF', 'CLP', 'DJF', 'GNF', 'JPY', 'KMF', 'KRW', 'MGA', 'PYG', 'RWF', 'UGX',
                   'VND', 'VUV', 'XAF', 'XOF', 'XPF');
UPDATE orders SET unit_price_minor = unit_price_minor * 10
WHERE currency IN ('BHD', 'JOD', 'KWD', 'OMR', 'TND');
