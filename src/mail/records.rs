//! The round's records of accepted mails in `mail_sent`, committed
//! together. Each send waits for the commit that holds its record before it
//! gives up its place among the mails in flight, so at most
//! [`super::MailSettings::concurrency`] mails are ever accepted and not yet
//! recorded (a crash sends again at most those, as when each had a
//! transaction of its own); and a commit carries every record that came in
//! while the one before it was being written, so under a rush a round
//! commits a few times instead of once per mail.

use std::sync::Mutex;

use sqlx::PgPool;
use uuid::Uuid;

/// One accepted mail.
pub(super) struct Record {
    pub message_id: Uuid,
    pub order_id: Option<Uuid>,
    pub waitlist_entry_id: Option<Uuid>,
    pub recipient: String,
}

#[derive(Debug, thiserror::Error)]
pub(super) enum RecordError {
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    /// The commit that held this record failed (its error went to the
    /// send that wrote it).
    #[error("its record's commit failed")]
    Lost,
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Record>,
    /// Records are numbered as they come, from 1.
    last_queued: u64,
    /// Every record up to this number is committed...
    committed: u64,
    /// ...except those in these ranges, whose commit failed.
    lost: Vec<(u64, u64)>,
}

#[derive(Default)]
pub(super) struct Records {
    queue: Mutex<Queue>,
    /// One commit at a time; whoever holds it writes all that is waiting.
    writer: tokio::sync::Mutex<()>,
}

impl Records {
    /// Record `record` and return once it is committed.
    pub(super) async fn record(&self, db: &PgPool, record: Record) -> Result<(), RecordError> {
        let number = {
            let mut queue = self.lock();
            queue.waiting.push(record);
            queue.last_queued += 1;
            queue.last_queued
        };
        let _writer = self.writer.lock().await;
        let (batch, mut taken) = {
            let mut queue = self.lock();
            if queue
                .lost
                .iter()
                .any(|(from, to)| (*from..=*to).contains(&number))
            {
                return Err(RecordError::Lost);
            }
            if queue.committed >= number {
                return Ok(());
            }
            let first = queue.last_queued - queue.waiting.len() as u64 + 1;
            let taken = Taken {
                records: self,
                first,
                last: queue.last_queued,
                committed: false,
            };
            (std::mem::take(&mut queue.waiting), taken)
        };
        let written = write(db, batch).await;
        taken.committed = written.is_ok();
        drop(taken);
        Ok(written?)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        // A panic while the lock was held left nothing half-done: the queue
        // is changed only by whole assignments.
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The records one writer took, settled when it is dropped: committed, or
/// lost, also when the writer's future is dropped mid-write (a transaction
/// that may not have committed fails every send whose record it held; if
/// it did commit, the next round's read of `mail_sent` skips them).
struct Taken<'a> {
    records: &'a Records,
    first: u64,
    last: u64,
    committed: bool,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        let mut queue = self.records.lock();
        queue.committed = queue.committed.max(self.last);
        if !self.committed {
            queue.lost.push((self.first, self.last));
        }
    }
}

/// One transaction for the batch: behind a pooler in transaction mode a
/// one-off statement would commit only when its connection went back
/// (tests/it/house/writes.rs).
async fn write(db: &PgPool, batch: Vec<Record>) -> Result<(), sqlx::Error> {
    let mut message_ids = Vec::with_capacity(batch.len());
    let mut order_ids = Vec::with_capacity(batch.len());
    let mut entry_ids = Vec::with_capacity(batch.len());
    let mut recipients = Vec::with_capacity(batch.len());
    for record in batch {
        message_ids.push(record.message_id);
        order_ids.push(record.order_id);
        entry_ids.push(record.waitlist_entry_id);
        recipients.push(record.recipient);
    }
    let mut tx = db.begin().await?;
    sqlx::query!(
        "INSERT INTO mail_sent (message_id, order_id, waitlist_entry_id, recipient)
         SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[])
         ON CONFLICT (message_id) DO NOTHING",
        &message_ids,
        &order_ids as &[Option<Uuid>],
        &entry_ids as &[Option<Uuid>],
        &recipients,
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    metrics::counter!("stampede_mails_sent_total").increment(message_ids.len() as u64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures_util::future::join_all;

    use super::*;

    fn record(recipient: &str) -> Record {
        Record {
            message_id: Uuid::new_v4(),
            order_id: None,
            waitlist_entry_id: None,
            recipient: recipient.to_owned(),
        }
    }

    /// Counts the transactions that wrote to `mail_sent`.
    async fn count_writing_transactions(db: &PgPool) {
        sqlx::raw_sql(
            "CREATE TABLE writers (xid xid8 PRIMARY KEY);
             CREATE FUNCTION note_writer() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 INSERT INTO writers VALUES (pg_current_xact_id()) ON CONFLICT DO NOTHING;
                 RETURN NULL;
             END $$;
             CREATE TRIGGER note_writer AFTER INSERT ON mail_sent
                 FOR EACH STATEMENT EXECUTE FUNCTION note_writer();",
        )
        .execute(db)
        .await
        .unwrap();
    }

    async fn recipients(db: &PgPool) -> Vec<String> {
        sqlx::query_scalar("SELECT recipient FROM mail_sent ORDER BY recipient")
            .fetch_all(db)
            .await
            .unwrap()
    }

    /// Records that come in while one is being written share the next
    /// commit, and each send hears of its own.
    #[sqlx::test(migrations = "./migrations")]
    async fn records_that_come_together_share_a_commit(db: PgPool) {
        count_writing_transactions(&db).await;
        let records = Records::default();
        let names: Vec<String> = (0..20)
            .map(|i| format!("buyer{i:02}@example.test"))
            .collect();
        // The first takes the writer at once; the other 19 queue behind it.
        let results = join_all(names.iter().map(|name| records.record(&db, record(name)))).await;
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        assert_eq!(recipients(&db).await, names);
        let writers: i64 = sqlx::query_scalar("SELECT count(*) FROM writers")
            .fetch_one(&db)
            .await
            .unwrap();
        assert_eq!(
            writers, 2,
            "one commit for the first, one for the 19 behind it"
        );
    }

    /// Delays (and, for `bounce@`, fails) the insert of a record, in its
    /// transaction: a commit that takes a while, or never comes.
    async fn slow_inserts(db: &PgPool) {
        sqlx::raw_sql(
            "CREATE FUNCTION slow_insert() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF NEW.recipient IN ('bounce@example.test', 'slow@example.test') THEN
                     PERFORM pg_sleep(0.3);
                 END IF;
                 IF NEW.recipient = 'bounce@example.test' THEN
                     RAISE EXCEPTION 'injected failure';
                 END IF;
                 RETURN NEW;
             END $$;
             CREATE TRIGGER slow_insert BEFORE INSERT ON mail_sent
                 FOR EACH ROW EXECUTE FUNCTION slow_insert();",
        )
        .execute(db)
        .await
        .unwrap();
    }

    /// A failed commit fails every send whose record it held (none of them
    /// is recorded, so each is sent again), and no send whose record came
    /// in while it was being written.
    #[sqlx::test(migrations = "./migrations")]
    async fn a_failed_commit_fails_every_send_it_held_and_no_other(db: PgPool) {
        slow_inserts(&db).await;
        let records = Records::default();
        let batch = ["a@example.test", "bounce@example.test", "b@example.test"];
        // `a` is written alone; `bounce` and `b` share the next commit.
        let held = join_all(batch.map(|name| records.record(&db, record(name))));
        // `c` comes in while that commit is being tried.
        let during = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            records.record(&db, record("c@example.test")).await
        };
        let (results, during) = tokio::join!(held, during);
        assert!(results[0].is_ok(), "{:?}", results[0]);
        assert!(
            matches!(results[1], Err(RecordError::Database(_))),
            "{:?}",
            results[1]
        );
        assert!(
            matches!(results[2], Err(RecordError::Lost)),
            "{:?}",
            results[2]
        );
        assert!(during.is_ok(), "{during:?}");
        records.record(&db, record("d@example.test")).await.unwrap();
        assert_eq!(
            recipients(&db).await,
            ["a@example.test", "c@example.test", "d@example.test"]
        );
    }

    /// A writer dropped in the middle of its commit (its round cancelled)
    /// fails the sends whose records it held: none of them hears Ok for a
    /// record that may not be there.
    #[sqlx::test(migrations = "./migrations")]
    async fn a_writer_dropped_mid_commit_fails_the_sends_it_held(db: PgPool) {
        slow_inserts(&db).await;
        let records = Records::default();
        let first = records.record(&db, record("a@example.test"));
        // Takes the writer after `a` and, with `b`'s record, is dropped
        // while its insert sleeps.
        let dropped = tokio::time::timeout(
            Duration::from_millis(150),
            records.record(&db, record("slow@example.test")),
        );
        let mate = records.record(&db, record("b@example.test"));
        let (first, dropped, mate) = tokio::join!(first, dropped, mate);
        assert!(first.is_ok(), "{first:?}");
        assert!(dropped.is_err(), "the slow commit should have been cut off");
        assert!(matches!(mate, Err(RecordError::Lost)), "{mate:?}");
        records.record(&db, record("c@example.test")).await.unwrap();
        assert_eq!(recipients(&db).await, ["a@example.test", "c@example.test"]);
    }
}
