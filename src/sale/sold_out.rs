//! Sold-out flags, in process: once Postgres has said that a ticket type has
//! none left, later purchases of it are refused without a transaction.
//!
//! Idempotency holds after the sell-out too: a retry of a purchase that
//! committed gets its order back. So that a refusal need not read Postgres
//! to tell, each flag learns, once, the keys (buyer and idempotency key) of
//! the type's orders ([`Committed`]): a request whose key is not among them
//! cannot be such a retry and is refused with no I/O at all; the others
//! (and every request until the keys are known) read Postgres as before. The
//! keys stay right for as long as the flag stands: no order of the type can
//! commit while it has none left, and the flag falls when tickets come back.
//!
//! Tickets come back by cancellation or a capacity change, made by any
//! instance: a trigger (migrations/0006) notifies `stampede_stock_returned`
//! with the ticket type's id, and every instance LISTENs
//! ([`super::stock_listener`]) and clears its flag.
//! A flag also lapses after a while (`EngineSettings::sold_out_lifetime`), so
//! a notification lost while the listener reconnects costs at most that long.
//! Correctness never rests on the flags: the sale transaction checks the
//! stock itself.

use std::{
    collections::{HashMap, HashSet},
    hash::BuildHasher,
    sync::{Arc, Mutex, PoisonError, Weak},
    time::{Duration, Instant},
};

use sqlx::PgPool;

use super::{request::PurchaseRequest, round_trips::postgres_round, stock_listener::StockWatcher};
use crate::domain::TicketTypeId;

/// A flag learns the keys of at most this many orders (a few MB); past it,
/// refusals of that type read Postgres as they did before.
const MAX_COMMITTED_KEYS: i64 = 200_000;

/// How often at most one instance asks Postgres whether a type the Redis
/// gate calls sold out really is ([`SoldOut::suspect`]).
const SUSPECT_EVERY: Duration = Duration::from_millis(100);

/// What a flag says about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flagged {
    /// No flag: the request goes on to the sale.
    No,
    /// Sold out, and the request's key is not one of the type's orders:
    /// refuse it, no read needed.
    Refuse,
    /// Sold out, and the request may be the retry of a committed purchase
    /// (its key is among the orders', or they are not known yet): read.
    MayReplay,
}

#[derive(Debug)]
struct Flag {
    since: Instant,
    /// Tells a load that finishes late which flag it was made for.
    epoch: u64,
    committed: Option<Arc<Committed>>,
}

/// The hashed keys of a sold-out ticket type's orders. A hash that collides
/// costs one read, never a wrong answer.
#[derive(Debug)]
struct Committed(HashSet<u64, foldhash::fast::RandomState>);

#[derive(Debug, Default)]
struct Flags {
    by_type: HashMap<TicketTypeId, Flag, foldhash::fast::RandomState>,
    next_epoch: u64,
    /// When each type was last checked in Postgres on the gate's word.
    suspected: HashMap<TicketTypeId, Instant>,
}

#[derive(Debug)]
pub struct SoldOut {
    lifetime: Duration,
    flags: Arc<Mutex<Flags>>,
    /// Where the keys of a sold-out type's orders are read; `None`: never.
    db: Option<PgPool>,
    /// Seeded per process: which keys collide is not known outside.
    hasher: foldhash::fast::RandomState,
}

impl SoldOut {
    /// `db`: where flags learn their types' committed keys (`None`: every
    /// refusal of a sold-out type may be a replay).
    pub fn new(lifetime: Duration, db: Option<PgPool>) -> Self {
        Self {
            lifetime,
            flags: Arc::new(Mutex::new(Flags::default())),
            db,
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    fn flags(&self) -> std::sync::MutexGuard<'_, Flags> {
        lock(&self.flags)
    }

    fn key_hash(&self, email: &str, key: &str) -> u64 {
        self.hasher.hash_one((email, key))
    }

    pub fn is_set(&self, ticket_type_id: TicketTypeId) -> bool {
        self.flags()
            .by_type
            .get(&ticket_type_id)
            .is_some_and(|flag| flag.since.elapsed() < self.lifetime)
    }

    /// Whether the type is flagged and its orders' keys known.
    pub fn knows_committed_keys(&self, ticket_type_id: TicketTypeId) -> bool {
        self.flags()
            .by_type
            .get(&ticket_type_id)
            .is_some_and(|flag| flag.since.elapsed() < self.lifetime && flag.committed.is_some())
    }

    /// Whether `request` is refused by a flag, and whether it needs a read.
    pub fn check(&self, request: &PurchaseRequest) -> Flagged {
        let committed = {
            let flags = self.flags();
            match flags.by_type.get(&request.ticket_type_id) {
                Some(flag) if flag.since.elapsed() < self.lifetime => flag.committed.clone(),
                _ => return Flagged::No,
            }
        };
        let Some(committed) = committed else {
            return Flagged::MayReplay;
        };
        let hash = self.key_hash(request.email.as_str(), request.idempotency_key.as_str());
        if committed.0.contains(&hash) {
            Flagged::MayReplay
        } else {
            Flagged::Refuse
        }
    }

    /// Postgres found none left. Call after the transaction that found it
    /// has ended: the keys are then read from a later snapshot, which holds
    /// every order that took the type's stock.
    pub fn set(&self, ticket_type_id: TicketTypeId) {
        let epoch = {
            let mut flags = self.flags();
            let next = flags.next_epoch;
            match flags.by_type.get_mut(&ticket_type_id) {
                // Still standing: its keys are still right.
                Some(flag) if flag.since.elapsed() < self.lifetime => {
                    flag.since = Instant::now();
                    return;
                }
                _ => {
                    flags.next_epoch += 1;
                    flags.by_type.insert(
                        ticket_type_id,
                        Flag {
                            since: Instant::now(),
                            epoch: next,
                            committed: None,
                        },
                    );
                    next
                }
            }
        };
        if let Some(db) = &self.db {
            tokio::spawn(learn_committed(
                db.clone(),
                Arc::downgrade(&self.flags),
                self.hasher.clone(),
                ticket_type_id,
                epoch,
            ));
        }
    }

    /// The Redis gate refused a purchase of this type as sold out. Its count
    /// may be low only for a moment (admitted purchases not yet committed
    /// give theirs back if they fail), so the flag is set only if Postgres
    /// agrees; at most one read per type every [`SUSPECT_EVERY`].
    pub fn suspect(self: &Arc<Self>, ticket_type_id: TicketTypeId) {
        let Some(db) = self.db.clone() else { return };
        {
            let mut flags = self.flags();
            if flags
                .suspected
                .get(&ticket_type_id)
                .is_some_and(|at| at.elapsed() < SUSPECT_EVERY)
            {
                return;
            }
            flags.suspected.insert(ticket_type_id, Instant::now());
        }
        let sold_out = Arc::clone(self);
        tokio::spawn(async move {
            postgres_round("sold_out_check");
            let remaining = sqlx::query_scalar!(
                "SELECT remaining FROM ticket_types WHERE id = $1",
                ticket_type_id.get(),
            )
            .fetch_optional(&db)
            .await;
            match remaining {
                Ok(Some(0)) => sold_out.set(ticket_type_id),
                Ok(_) => {}
                Err(err) => tracing::debug!(error = %err, "sold-out check failed"),
            }
        });
    }

    fn clear(&self, ticket_type_id: TicketTypeId) {
        self.flags().by_type.remove(&ticket_type_id);
    }

    fn clear_all(&self) {
        self.flags().by_type.clear();
    }
}

fn lock(flags: &Mutex<Flags>) -> std::sync::MutexGuard<'_, Flags> {
    flags.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Read the keys of a sold-out type's orders and give them to its flag, if
/// that flag still stands (the same epoch: not cleared and set again since).
async fn learn_committed(
    db: PgPool,
    flags: Weak<Mutex<Flags>>,
    hasher: foldhash::fast::RandomState,
    ticket_type_id: TicketTypeId,
    epoch: u64,
) {
    postgres_round("sold_out_keys");
    let rows = sqlx::query!(
        "SELECT email, idempotency_key FROM orders WHERE ticket_type_id = $1 LIMIT $2",
        ticket_type_id.get(),
        MAX_COMMITTED_KEYS + 1,
    )
    .fetch_all(&db)
    .await;
    let rows = match rows {
        Ok(rows) if rows.len() as i64 <= MAX_COMMITTED_KEYS => rows,
        Ok(_) => return,
        Err(err) => {
            tracing::debug!(error = %err, "reading a sold-out type's keys failed");
            return;
        }
    };
    let committed = Arc::new(Committed(
        rows.iter()
            .map(|row| hasher.hash_one((row.email.as_str(), row.idempotency_key.as_str())))
            .collect(),
    ));
    let Some(flags) = flags.upgrade() else { return };
    let mut flags = lock(&flags);
    if let Some(flag) = flags.by_type.get_mut(&ticket_type_id)
        && flag.epoch == epoch
    {
        flag.committed = Some(committed);
    }
}

impl StockWatcher for SoldOut {
    fn returned(&self, ticket_type_id: TicketTypeId) {
        self.clear(ticket_type_id);
    }

    fn missed(&self) {
        self.clear_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use sqlx::postgres::PgPoolOptions;

    use super::*;
    use crate::sale::stock_listener::listen;

    fn id() -> TicketTypeId {
        TicketTypeId::from(uuid::Uuid::new_v4())
    }

    #[test]
    fn flags_stand_until_cleared_or_lapsed() {
        let flags = SoldOut::new(Duration::from_secs(60), None);
        let (a, b) = (id(), id());
        assert!(!flags.is_set(a));
        flags.set(a);
        assert!(flags.is_set(a));
        assert!(!flags.is_set(b));
        flags.set(b);
        flags.clear(a);
        assert!(!flags.is_set(a));
        assert!(flags.is_set(b));
        flags.set(a);
        flags.clear_all();
        assert!(!flags.is_set(a) && !flags.is_set(b));

        let short = SoldOut::new(Duration::from_millis(50), None);
        short.set(a);
        assert!(short.is_set(a));
        std::thread::sleep(Duration::from_millis(100));
        assert!(!short.is_set(a), "the flag lapses after its lifetime");
    }

    /// A pool whose every connection attempt fails at once (no such socket).
    fn unreachable() -> PgPool {
        PgPoolOptions::new()
            .acquire_timeout(Duration::from_secs(2))
            .connect_lazy("postgres://stampede@localhost/none?host=/nonexistent-stampede-socket")
            .unwrap()
    }

    /// The listener keeps trying while the flags are in use, and ends once
    /// they are dropped, even when it never got a connection.
    #[tokio::test]
    async fn the_listener_lives_as_long_as_its_flags() {
        let flags = Arc::new(SoldOut::new(Duration::from_secs(60), None));
        let task = tokio::spawn(listen(unreachable(), Arc::downgrade(&flags)));
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(!task.is_finished(), "the listener gave up while in use");
        drop(flags);
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the listener ends once its flags are dropped")
            .unwrap();

        tokio::time::timeout(
            Duration::from_secs(3),
            listen(unreachable(), Weak::<SoldOut>::new()),
        )
        .await
        .expect("without flags the listener does not even start");
    }
}
