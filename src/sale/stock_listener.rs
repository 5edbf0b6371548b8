//! What hears of returned stock, and the one LISTEN that tells it.
//!
//! Tickets come back by cancellation or a capacity change, made by any
//! instance: a trigger (migrations/0006) notifies `stampede_stock_returned`
//! with the ticket type's id; a sale published or moved notifies
//! `stampede_sale_scheduled` (migrations/0019). Every instance LISTENs on
//! both and tells its [`StockWatcher`]s: the sold-out flags
//! (`super::sold_out`) and the Redis gate (`super::gate`).

use std::{sync::Weak, time::Duration};

use sqlx::{
    PgPool,
    postgres::{PgListener, PgPoolOptions},
};

use crate::domain::TicketTypeId;

/// How long the listener waits before connecting again.
const RECONNECT: Duration = Duration::from_secs(1);

/// The channel that migrations/0006's trigger notifies.
const CHANNEL: &str = "stampede_stock_returned";

/// The channel that migrations/0019's trigger notifies: a ticket type's
/// sale published or moved.
const SCHEDULED: &str = "stampede_sale_scheduled";

/// What hears of returned stock: the sold-out flags, and the Redis gate
/// (`super::gate`), which rebuilds its counters.
pub trait StockWatcher: Send + Sync + 'static {
    /// Tickets of this type came back (a cancellation, a capacity raised).
    fn returned(&self, ticket_type_id: TicketTypeId);
    /// The sale of this type was published or moved (nothing sold yet, as
    /// far as this tells).
    fn scheduled(&self, _ticket_type_id: TicketTypeId) {}
    /// Notifications may have been lost (the listener (re)connected).
    fn missed(&self);
}

/// Tell `flags` as Postgres announces returned stock (and scheduled sales),
/// for as long as they are in use (the task ends when the engine is
/// dropped).
pub async fn listen<W: StockWatcher>(db: PgPool, flags: Weak<W>) {
    // A connection of its own: a listener holds its connection for good,
    // which would take a slot from the sale's pool.
    let db = PgPoolOptions::new()
        .max_connections(1)
        .max_lifetime(None)
        .idle_timeout(None)
        .connect_lazy_with(crate::db::session::direct_options(&db));
    while flags.strong_count() > 0 {
        let mut listener = match PgListener::connect_with(&db).await {
            Ok(listener) => listener,
            Err(err) => {
                tracing::warn!(error = %err, "sold-out listener cannot connect; retrying");
                tokio::time::sleep(RECONNECT).await;
                continue;
            }
        };
        if let Err(err) = listener.listen_all([CHANNEL, SCHEDULED]).await {
            tracing::warn!(error = %err, "sold-out listener cannot LISTEN; retrying");
            tokio::time::sleep(RECONNECT).await;
            continue;
        }
        // Whatever was announced before this LISTEN is lost: forget all.
        match flags.upgrade() {
            Some(flags) => resync(&*flags),
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
                        if notification.channel() == SCHEDULED {
                            flags.scheduled(id);
                        } else {
                            flags.returned(id);
                        }
                    }
                }
                Ok(Ok(None)) => resync(&*flags),
                Ok(Err(err)) => {
                    tracing::warn!(error = %err, "sold-out listener failed; reconnecting");
                    resync(&*flags);
                    break;
                }
            }
        }
    }
}

/// Notifications may have been lost: `flags` forgets what they would have
/// told, counted in `/metrics` (once per listener at start, then once per
/// reconnect: a rise after start-up says the listeners' connections drop).
fn resync<W: StockWatcher>(flags: &W) {
    flags.missed();
    metrics::counter!("stampede_stock_listener_resyncs_total").increment(1);
}
