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
