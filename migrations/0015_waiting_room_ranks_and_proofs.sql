-- The waiting room, finished (issue 12).
--
-- 1. A cheap position. Every entry gets a rank, its 1-based place in the
--    admission order: the pre-queue's ranks come from the shuffle, later
--    arrivals are ranked by the admitter once a second, in arrival order,
--    after everyone ranked before them. Admission goes by rank, so the
--    admitted are always ranks 1..admitted_upto, and a ranked entry's
--    "ahead" is rank - admitted_upto - 1: two numbers, no count. An entry
--    not ranked yet (at most a tick's worth) counts only the unranked ahead.
ALTER TABLE queue_entries ADD COLUMN rank bigint;
ALTER TABLE waiting_rooms
    ADD COLUMN ranked        bigint NOT NULL DEFAULT 0,
    ADD COLUMN admitted_upto bigint NOT NULL DEFAULT 0,
    ADD CONSTRAINT waiting_rooms_admitted_within_ranked CHECK (admitted_upto BETWEEN 0 AND ranked);

-- 2. The proof of work at the door: each solved challenge carries a random
--    salt, stored with the entry it created; a second entry from the same
--    solution is refused here.
ALTER TABLE queue_entries ADD COLUMN proof_salt bytea;
CREATE UNIQUE INDEX queue_entries_proof_once ON queue_entries (event_id, proof_salt)
    WHERE proof_salt IS NOT NULL;

-- Rooms that already have entries: rank them as the admitter did, by
-- (position, seq), and count those already admitted (always a prefix).
UPDATE queue_entries q SET rank = r.n
FROM (SELECT q2.id, row_number() OVER (PARTITION BY q2.event_id ORDER BY q2.position, q2.seq) AS n
      FROM queue_entries q2 JOIN waiting_rooms w ON w.event_id = q2.event_id
      WHERE w.shuffled_at IS NOT NULL) r
WHERE q.id = r.id;
UPDATE waiting_rooms w
SET ranked = coalesce((SELECT max(rank) FROM queue_entries q WHERE q.event_id = w.event_id), 0),
    admitted_upto = (SELECT count(*) FROM queue_entries q
                     WHERE q.event_id = w.event_id AND q.admitted_at IS NOT NULL);

-- Admission by rank, and the unranked tail by arrival.
DROP INDEX queue_entries_waiting;
CREATE UNIQUE INDEX queue_entries_by_rank ON queue_entries (event_id, rank);
CREATE INDEX queue_entries_unranked ON queue_entries (event_id, seq) WHERE rank IS NULL;
