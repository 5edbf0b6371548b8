-- Issue 10, the webhooks half: organizers' endpoints, one delivery per
-- endpoint per outbox message, and every attempt of each.
--
-- Fan-out reads the outbox through its own marker, apart from the AMQP
-- relay's `published_at`, so webhooks work with the relay off. Rows written
-- before webhooks existed have nobody to go to: marked done here.
ALTER TABLE outbox ADD COLUMN webhooks_fanned_at timestamptz;
UPDATE outbox SET webhooks_fanned_at = created_at;
CREATE INDEX outbox_webhooks_pending ON outbox (position) WHERE webhooks_fanned_at IS NULL;

CREATE TABLE webhook_endpoints (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    -- The order of the settings page and the API's cursor.
    seq             bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    organizer_id    uuid NOT NULL REFERENCES organizers (id) ON DELETE CASCADE,
    url             text NOT NULL CONSTRAINT webhook_endpoints_url_length CHECK (length(url) BETWEEN 1 AND 2048),
    description     text NOT NULL DEFAULT '',
    event_types     text[] NOT NULL CONSTRAINT webhook_endpoints_event_types_known CHECK (
                        cardinality(event_types) > 0 AND event_types <@ ARRAY[
                            'order.created', 'order.cancelled', 'event.cancelled',
                            'ticket_type.sold_out', 'ticket_type.available_again']::text[]),
    -- `whsec_<base64>`: kept to sign with (HMAC needs the key itself), shown
    -- once at creation and never again.
    secret          text NOT NULL,
    enabled         boolean NOT NULL DEFAULT true,
    disabled_reason text,
    disabled_at     timestamptz,
    last_success_at timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_endpoints_by_organizer ON webhook_endpoints (organizer_id, seq);

CREATE TABLE webhook_deliveries (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    seq              bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    endpoint_id      uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    -- The outbox message's id: the `webhook-id` header, the same on every
    -- attempt and redelivery.
    message_id       uuid NOT NULL,
    kind             text NOT NULL,
    -- The body sent, built once at fan-out: outbox rows are deleted after
    -- their retention, deliveries keep what they send.
    body             jsonb NOT NULL,
    status           text NOT NULL DEFAULT 'pending'
                         CONSTRAINT webhook_deliveries_status_known CHECK (status IN ('pending', 'succeeded', 'failed')),
    attempts         integer NOT NULL DEFAULT 0,
    -- When the worker may take it next (pending only); while an attempt is
    -- in flight, the end of its lease.
    next_attempt_at  timestamptz,
    -- The retry window (3 days by default) counts from here.
    first_attempt_at timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz,
    CONSTRAINT webhook_deliveries_once UNIQUE (endpoint_id, message_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries (endpoint_id, seq);

CREATE TABLE webhook_attempts (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id      uuid NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    attempted_at     timestamptz NOT NULL,
    -- The receiver's status, or NULL with `error` naming what failed
    -- (refused address, connect, timeout, ...).
    status_code      integer,
    error            text,
    latency_ms       integer NOT NULL,
    -- The start of the response body, at most a few KiB, as text.
    response_excerpt text NOT NULL DEFAULT '',
    -- The delay chosen before the next attempt (NULL: none follows).
    retry_in_ms      bigint
);
CREATE INDEX webhook_attempts_by_delivery ON webhook_attempts (delivery_id, id);
