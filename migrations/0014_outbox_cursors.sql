-- Issue 10: the outbox is append-only. Its two consumers (the AMQP relay and
-- the webhook fan-out) each keep a cursor instead of marking every row:
-- marking rewrote each row twice (`published_at`, `webhooks_fanned_at`, both
-- in partial-index predicates, so never a HOT update): 2.6 times the WAL
-- per order of the engine without an outbox (BENCHMARKS.md, "The outbox's
-- cost, found and fixed").
--
-- A row's place in the log is (xid, position): `xid` is the writing
-- transaction's id. Positions are drawn before commit, so a lower position
-- can commit after a higher one; but once a transaction id is below the
-- oldest running one (`pg_snapshot_xmin`), that transaction has ended and
-- no row with a lower xid can appear any more. A consumer reads rows after
-- its cursor and below that horizon, in (xid, position) order, and moves
-- its cursor past what it has handled, so it skips nothing and every row is
-- handled at least once.
--
-- Its one index is that order, which is all its readers use: the position's
-- own key and the message id's unique index went (ids are random v4 UUIDs,
-- so their index took a write on a random page for every order).
ALTER TABLE outbox ADD COLUMN xid xid8 NOT NULL DEFAULT pg_current_xact_id();
ALTER TABLE outbox DROP CONSTRAINT outbox_pkey, DROP CONSTRAINT outbox_id_unique,
    ADD CONSTRAINT outbox_log_order PRIMARY KEY (xid, position);

CREATE TABLE outbox_cursors (
    consumer  text PRIMARY KEY CONSTRAINT outbox_cursor_known CHECK (consumer IN ('amqp', 'webhooks')),
    -- Everything at or before (xid, position) has been handled.
    xid       xid8 NOT NULL,
    position  bigint NOT NULL,
    moved_at  timestamptz NOT NULL DEFAULT now()
);

-- Every row existing now carries this migration's xid. Each cursor starts
-- just before the first row its consumer had not handled yet (rows after it
-- that were handled go once more: delivery is at least once).
INSERT INTO outbox_cursors (consumer, xid, position)
SELECT 'amqp', pg_current_xact_id(),
       coalesce((SELECT min(position) - 1 FROM outbox WHERE published_at IS NULL),
                (SELECT max(position) FROM outbox), 0);
INSERT INTO outbox_cursors (consumer, xid, position)
SELECT 'webhooks', pg_current_xact_id(),
       coalesce((SELECT min(position) - 1 FROM outbox WHERE webhooks_fanned_at IS NULL),
                (SELECT max(position) FROM outbox), 0);

DROP INDEX outbox_unpublished;
DROP INDEX outbox_webhooks_pending;
ALTER TABLE outbox DROP COLUMN published_at, DROP COLUMN webhooks_fanned_at;

-- The rows a consumer has not handled yet (for the depth in /metrics, the
-- retention and the tests).
CREATE FUNCTION outbox_behind(which text) RETURNS SETOF outbox
LANGUAGE sql STABLE AS $$
    SELECT o.* FROM outbox o JOIN outbox_cursors c ON c.consumer = which
    WHERE (o.xid, o.position) > (c.xid, c.position)
$$;
