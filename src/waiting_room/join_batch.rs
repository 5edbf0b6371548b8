//! New queue entries of one event, written in batches: the joins that
//! arrive while one batch's transaction runs wait for it and go together in
//! the next, as the engine batches purchases. One transaction per batch
//! instead of one per join; no timer, so a lone join waits for nothing.
//!
//! A batch's transaction (the statements are `sql/waiting_room/join_*`):
//! 1. the advisory locks of the batch's client addresses, in key order (so
//!    two batches, of this instance or another, cannot deadlock): joins
//!    from one address take turns between their count and their insert.
//!    An address's lock is one of [`LOCK_BUCKETS`] per event, so a batch
//!    takes at most that many however many addresses it holds (advisory
//!    locks fill Postgres's shared lock table, which every transaction
//!    needs: 64 per connection by default);
//! 2. the room's row `FOR SHARE`, with its event: batches run side by side,
//!    the shuffle (which updates the row) waits for them and they for it,
//!    so every entry is either in the shuffle or behind it; a room switched
//!    off or an event no longer published since this instance's cached
//!    read takes no entry (the whole batch is "not found");
//! 3. each address's entries, counted up to the cap, in a statement of its
//!    own (its snapshot is taken after the locks);
//! 4. decided in arrival order: an address's joins past the cap are refused;
//! 5. one insert of the rest, in arrival order (their `seq`), where a
//!    replayed proof of work (`queue_entries_proof_once`) writes nothing and
//!    is refused alone.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, PoisonError},
};

use sha2::{Digest, Sha256};
use sqlx::PgPool;
use time::OffsetDateTime;
use tokio::sync::oneshot;
use tracing::Instrument as _;
use uuid::Uuid;

use crate::{
    domain::{EventId, QueueEntryId},
    error::AppError,
};

/// Joins written in one transaction at most.
const MAX_BATCH: usize = 512;
/// Joins of one event waiting in this instance at most; beyond, 503 at once.
const MAX_WAITING: usize = 16_384;
/// Advisory locks per event that client addresses share: a batch takes at
/// most this many, and two batches with an address in common (or only a
/// bucket) take turns.
const LOCK_BUCKETS: u8 = 32;

/// A join that passed its checks (the room is open, the proof is good).
pub(super) struct NewEntry {
    pub client_hash: Vec<u8>,
    pub proof_salt: Vec<u8>,
    pub joined_at: OffsetDateTime,
}

/// What became of one join.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// The entry, and whether the room was shuffled when it was written
    /// (as read under the room's row lock, not from a cache).
    Joined { entry: QueueEntryId, shuffled: bool },
    /// Its address holds the cap of entries already.
    TooMany,
    /// Its solved challenge made an entry already.
    ProofReused,
}

type Answer = Result<Outcome, Arc<AppError>>;

struct Waiting {
    entry: NewEntry,
    reply: oneshot::Sender<Answer>,
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Waiting>,
    /// A task writes this event's batches (and takes what waits when its
    /// batch ends).
    writing: bool,
}

/// The joins waiting, per event, in this instance.
#[derive(Clone, Default)]
pub(super) struct JoinBatcher {
    queues: Arc<Mutex<HashMap<EventId, Queue>>>,
}

impl JoinBatcher {
    /// Queue the join and wait for its batch's answer. `cap`: entries per
    /// client address and event.
    pub(super) async fn join(
        &self,
        db: &PgPool,
        event_id: EventId,
        cap: u32,
        entry: NewEntry,
    ) -> Result<Outcome, AppError> {
        let (reply, answer) = oneshot::channel();
        let start_writer = {
            let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
            let queue = queues.entry(event_id).or_default();
            if queue.waiting.len() >= MAX_WAITING {
                return Err(AppError::Overloaded);
            }
            queue.waiting.push(Waiting { entry, reply });
            !std::mem::replace(&mut queue.writing, true)
        };
        if start_writer {
            // A task of its own: a buyer who hangs up does not stop the
            // batch the others wait for.
            let span = tracing::info_span!("queue join batches", %event_id);
            tokio::spawn(
                self.clone()
                    .write_batches(db.clone(), event_id, cap)
                    .instrument(span),
            );
        }
        match answer.await {
            Ok(Ok(outcome)) => Ok(outcome),
            Ok(Err(err)) => Err(super::shared_error(err)),
            Err(_) => Err(AppError::internal(anyhow::anyhow!(
                "the queue join batch ended without an answer"
            ))),
        }
    }

    /// Write what waits, a batch at a time, until nothing does.
    async fn write_batches(self, db: PgPool, event_id: EventId, cap: u32) {
        let mut writing = Writing {
            batcher: &self,
            event_id,
            done: false,
        };
        loop {
            let batch: Vec<Waiting> = {
                let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
                match queues.get_mut(&event_id) {
                    Some(queue) if !queue.waiting.is_empty() => {
                        let n = queue.waiting.len().min(MAX_BATCH);
                        queue.waiting.drain(..n).collect()
                    }
                    _ => {
                        queues.remove(&event_id);
                        writing.done = true;
                        return;
                    }
                }
            };
            let entries: Vec<&NewEntry> = batch.iter().map(|w| &w.entry).collect();
            let answers: Vec<Answer> = match write_batch(&db, event_id, cap, &entries).await {
                Ok(outcomes) => outcomes.into_iter().map(Ok).collect(),
                Err(err) => {
                    tracing::warn!(error = %err, joins = batch.len(), "queue join batch failed");
                    let err = Arc::new(err);
                    batch.iter().map(|_| Err(Arc::clone(&err))).collect()
                }
            };
            for (waiting, answer) in batch.into_iter().zip(answers) {
                // The buyer may have hung up; their entry stands.
                let _ = waiting.reply.send(answer);
            }
        }
    }
}

/// If the writer ends other than by running out of joins (a panic), the
/// joins still waiting get an error rather than waiting for ever, and the
/// next join starts a writer afresh.
struct Writing<'a> {
    batcher: &'a JoinBatcher,
    event_id: EventId,
    done: bool,
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        if !self.done {
            let mut queues = self
                .batcher
                .queues
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            queues.remove(&self.event_id);
        }
    }
}

/// One batch's transaction (the module's steps 1-5); an outcome per entry,
/// in order.
async fn write_batch(
    db: &PgPool,
    event_id: EventId,
    cap: u32,
    entries: &[&NewEntry],
) -> Result<Vec<Outcome>, AppError> {
    let cap = i64::from(cap);
    let locks: Vec<i64> = entries
        .iter()
        .map(|entry| client_lock(event_id, &entry.client_hash))
        .collect();
    let hashes: Vec<Vec<u8>> = entries.iter().map(|e| e.client_hash.clone()).collect();
    let mut tx = db.begin().await?;
    sqlx::query_file_scalar!("sql/waiting_room/join_lock_clients.sql", &locks)
        .fetch_one(&mut *tx)
        .await?;
    let room = sqlx::query_file!("sql/waiting_room/join_share_room.sql", event_id.get())
        .fetch_optional(&mut *tx)
        .await?
        .filter(|room| room.open)
        .ok_or(AppError::NotFound)?;
    let shuffled = room.shuffled_at.is_some();
    let held = sqlx::query_file!(
        "sql/waiting_room/join_held.sql",
        event_id.get(),
        &hashes,
        cap
    )
    .fetch_all(&mut *tx)
    .await?;
    let mut room_left: HashMap<Vec<u8>, i64> = held
        .into_iter()
        .map(|row| (row.client_hash, cap - row.held))
        .collect();
    // Each entry within the cap gets its id here (random, v4, as the
    // column's default would draw it); an id the insert does not return
    // is a replayed proof.
    let mut outcomes: Vec<Result<Uuid, Outcome>> = Vec::with_capacity(entries.len());
    let (mut ids, mut joined_at, mut client_hash, mut proof_salt) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut salts = HashSet::new();
    for entry in entries {
        // A solution sent twice in one batch is refused before it takes a
        // place of its address's cap.
        if !salts.insert(entry.proof_salt.as_slice()) {
            outcomes.push(Err(Outcome::ProofReused));
            continue;
        }
        let left = room_left.entry(entry.client_hash.clone()).or_insert(cap);
        if *left <= 0 {
            outcomes.push(Err(Outcome::TooMany));
            continue;
        }
        *left -= 1;
        let id = Uuid::new_v4();
        outcomes.push(Ok(id));
        ids.push(id);
        joined_at.push(entry.joined_at);
        client_hash.push(entry.client_hash.clone());
        proof_salt.push(entry.proof_salt.clone());
    }
    let inserted: HashSet<Uuid> = if ids.is_empty() {
        HashSet::new()
    } else {
        sqlx::query_file_scalar!(
            "sql/waiting_room/join_insert.sql",
            event_id.get(),
            &ids,
            &joined_at,
            &client_hash,
            &proof_salt,
        )
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .collect()
    };
    tx.commit().await?;
    tracing::debug!(
        joins = entries.len(),
        inserted = inserted.len(),
        "queue join batch"
    );
    Ok(outcomes
        .into_iter()
        .map(|decided| match decided {
            Ok(id) if inserted.contains(&id) => Outcome::Joined {
                entry: QueueEntryId::from(id),
                shuffled,
            },
            // Its salt made an entry before, or earlier in this batch.
            Ok(_) => Outcome::ProofReused,
            Err(refused) => refused,
        })
        .collect())
}

/// The advisory lock key of one (event, client address): one of the
/// event's [`LOCK_BUCKETS`], chosen by the address's keyed hash; 64 bits of
/// a hash, so two events share a key with odds 2^-64.
fn client_lock(event_id: EventId, client_hash: &[u8]) -> i64 {
    let bucket = client_hash.first().map_or(0, |byte| byte % LOCK_BUCKETS);
    let mut hash = Sha256::new();
    hash.update(b"stampede queue cap bucket");
    hash.update(event_id.get().as_bytes());
    hash.update([bucket]);
    let digest = hash.finalize();
    let mut first = [0_u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}
