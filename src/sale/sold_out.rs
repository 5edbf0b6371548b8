//! Sold-out flags, in process: once Postgres has said that a ticket type has
//! none left, later purchases of it are refused without a transaction (a
//! point read still replays a buyer's earlier order for the same key).
//!
//! Tickets come back by cancellation or a capacity change, made by any
//! instance: a trigger (migrations/0006) notifies `stampede_stock_returned`
//! with the ticket type's id, and every instance LISTENs and clears its flag.
//! A flag also lapses after a while (`EngineSettings::sold_out_lifetime`), so a notification lost while
//! the listener reconnects costs at most that long. Correctness never rests
//! on the flags: the sale transaction checks the stock itself.

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError, Weak},
    time::{Duration, Instant},
};

use sqlx::{
    PgPool,
    postgres::{PgListener, PgPoolOptions},
};

use crate::domain::TicketTypeId;

/// How long the listener waits before connecting again.
const RECONNECT: Duration = Duration::from_secs(1);

/// The channel that migrations/0006's trigger notifies.
const CHANNEL: &str = "stampede_stock_returned";

#[derive(Debug)]
pub struct SoldOut {
    lifetime: Duration,
    since: Mutex<HashMap<TicketTypeId, Instant>>,
}

impl SoldOut {
    pub fn new(lifetime: Duration) -> Self {
        Self {
            lifetime,
            since: Mutex::new(HashMap::new()),
        }
    }

    pub fn is_set(&self, ticket_type_id: TicketTypeId) -> bool {
        let flags = self.since.lock().unwrap_or_else(PoisonError::into_inner);
        flags
            .get(&ticket_type_id)
            .is_some_and(|since| since.elapsed() < self.lifetime)
    }

    pub fn set(&self, ticket_type_id: TicketTypeId) {
        let mut flags = self.since.lock().unwrap_or_else(PoisonError::into_inner);
        flags.insert(ticket_type_id, Instant::now());
    }

    fn clear(&self, ticket_type_id: TicketTypeId) {
        let mut flags = self.since.lock().unwrap_or_else(PoisonError::into_inner);
        flags.remove(&ticket_type_id);
    }

    fn clear_all(&self) {
        let mut flags = self.since.lock().unwrap_or_else(PoisonError::into_inner);
        flags.clear();
    }
}

/// What hears of returned stock: the sold-out flags, and the Redis gate
/// ([`super::gate`]), which rebuilds its counters.
pub trait StockWatcher: Send + Sync + 'static {
    /// Tickets of this type came back (a cancellation, a capacity raised).
    fn returned(&self, ticket_type_id: TicketTypeId);
    /// Notifications may have been lost (the listener (re)connected).
    fn missed(&self);
}

impl StockWatcher for SoldOut {
    fn returned(&self, ticket_type_id: TicketTypeId) {
        self.clear(ticket_type_id);
    }

    fn missed(&self) {
        self.clear_all();
    }
}

/// Tell `flags` as Postgres announces returned stock, for as long as they
/// are in use (the task ends when the engine is dropped).
pub async fn listen<W: StockWatcher>(db: PgPool, flags: Weak<W>) {
    // A connection of its own: a listener holds its connection for good,
    // which would take a slot from the sale's pool.
    let db = PgPoolOptions::new()
        .max_connections(1)
        .max_lifetime(None)
        .idle_timeout(None)
        .connect_lazy_with((*db.connect_options()).clone());
    while flags.strong_count() > 0 {
        let mut listener = match PgListener::connect_with(&db).await {
            Ok(listener) => listener,
            Err(err) => {
                tracing::warn!(error = %err, "sold-out listener cannot connect; retrying");
                tokio::time::sleep(RECONNECT).await;
                continue;
            }
        };
        if let Err(err) = listener.listen(CHANNEL).await {
            tracing::warn!(error = %err, "sold-out listener cannot LISTEN; retrying");
            tokio::time::sleep(RECONNECT).await;
            continue;
        }
        // Whatever was announced before this LISTEN is lost: forget all.
        match flags.upgrade() {
            Some(flags) => flags.missed(),
            None => return,
        }
        loop {
            // `None`: the connection dropped (and reconnects on the next
            // call); what was notified meanwhile is lost, so forget all.
            let received = tokio::time::timeout(RECONNECT, listener.try_recv()).await;
            let Some(flags) = flags.upgrade() else { return };
            match received {
                Err(_elapsed) => {}
                Ok(Ok(Some(notification))) => {
                    if let Some(id) = TicketTypeId::parse(notification.payload()) {
                        flags.returned(id);
                    }
                }
                Ok(Ok(None)) => flags.missed(),
                Ok(Err(err)) => {
                    tracing::warn!(error = %err, "sold-out listener failed; reconnecting");
                    flags.missed();
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn id() -> TicketTypeId {
        TicketTypeId::from(uuid::Uuid::new_v4())
    }

    #[test]
    fn flags_stand_until_cleared_or_lapsed() {
        let flags = SoldOut::new(Duration::from_secs(60));
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

        let short = SoldOut::new(Duration::from_millis(50));
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
        let flags = Arc::new(SoldOut::new(Duration::from_secs(60)));
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
