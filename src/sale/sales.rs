//! [`Sales`], what every handler sells through: built once at start-up
//! (the strategy, the engine's settings, the gate, the waiting rooms), then
//! cloned. The purchase itself reads top-down in `super` (the module's
//! own file).

use std::{fmt, sync::Arc, time::Duration};

use sqlx::PgPool;

use super::{
    batch::{Batcher, EngineSettings},
    gate::{Gate, GateRedis, GateSettings},
    holds::Holding,
    sold_out::SoldOut,
    stock_listener,
    strategy::Strategy,
};
use crate::{
    domain::{ConfirmKey, TicketTypeId},
    error::AppError,
    waiting_room::{DEFAULT_ENTRIES_PER_CLIENT, RoomKey, Rooms},
};

/// The sale path, shared by every handler: the pool, the strategy, the
/// batch queues and the sold-out flags.
#[derive(Clone)]
pub struct Sales {
    pub(super) db: PgPool,
    pub(super) strategy: Strategy,
    pub(super) batcher: Arc<Batcher>,
    pub(super) sold_out: Arc<SoldOut>,
    /// For the Redis baselines only.
    pub(super) redis: Option<deadpool_redis::Pool>,
    /// The optional Redis gate in front of the engine ([`super::gate`]).
    pub(super) gate: Option<Arc<Gate>>,
    /// Which events have a waiting room, and the key their passes are
    /// signed with (`crate::waiting_room`).
    pub(super) rooms: Rooms,
    /// Derives held orders' confirmation tokens, and the rules of holds
    /// for unproven mailboxes ([`super::holds`]).
    pub(super) holding: Holding,
}

impl fmt::Debug for Sales {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sales")
            .field("strategy", &self.strategy)
            .finish_non_exhaustive()
    }
}

impl Sales {
    /// Must be called inside a Tokio runtime: it starts the task that
    /// clears sold-out flags when stock comes back.
    pub fn new(db: PgPool, strategy: Strategy, settings: EngineSettings) -> Self {
        let sold_out = Arc::new(SoldOut::new(settings.sold_out_lifetime, Some(db.clone())));
        tokio::spawn(stock_listener::listen(
            db.clone(),
            Arc::downgrade(&sold_out),
        ));
        let holding = Holding {
            key: ConfirmKey::random(),
            rules: settings.holds,
        };
        Self {
            batcher: Arc::new(Batcher::new(
                db.clone(),
                settings,
                Arc::clone(&sold_out),
                holding.key.clone(),
            )),
            db,
            strategy,
            sold_out,
            redis: None,
            gate: None,
            rooms: Rooms::new(RoomKey::random(), DEFAULT_ENTRIES_PER_CLIENT),
            holding,
        }
    }

    /// The key held orders' confirmation tokens are derived with; every
    /// instance of a deployment must share it.
    pub fn with_confirm_key(mut self, key: ConfirmKey) -> Self {
        self.holding.key = key;
        self.batcher = Arc::new(Batcher::new(
            self.db.clone(),
            self.batcher.settings(),
            Arc::clone(&self.sold_out),
            self.holding.key.clone(),
        ));
        self
    }

    pub fn confirm_key(&self) -> &ConfirmKey {
        &self.holding.key
    }

    /// The waiting rooms' key and settings (see `crate::waiting_room`).
    pub fn with_rooms(mut self, rooms: Rooms) -> Self {
        self.rooms = rooms;
        self
    }

    pub fn rooms(&self) -> &Rooms {
        &self.rooms
    }

    /// Purchases not sold within `deadline` of their arrival are refused
    /// and never written (see [`EngineSettings::deadline`]).
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        let settings = EngineSettings {
            deadline,
            ..self.batcher.settings()
        };
        self.batcher = Arc::new(Batcher::new(
            self.db.clone(),
            settings,
            Arc::clone(&self.sold_out),
            self.holding.key.clone(),
        ));
        self
    }

    /// The Redis server of the `redis-*` baselines.
    pub fn with_redis(mut self, url: &str) -> Result<Self, AppError> {
        let pool = deadpool_redis::Config::from_url(url)
            .create_pool(Some(deadpool_redis::Runtime::Tokio1))
            .map_err(AppError::internal)?;
        self.redis = Some(pool);
        Ok(self)
    }

    /// Put the Redis gate ([`super::gate`]) in front of the strategy: purchases are
    /// checked and counted in Redis first, and only those it admits reach
    /// Postgres. Must be called inside a Tokio runtime.
    pub fn with_gate(mut self, redis: GateRedis, settings: GateSettings) -> Result<Self, AppError> {
        self.gate = Some(Gate::start(self.db.clone(), redis, settings)?);
        Ok(self)
    }

    /// The Redis gate, if configured.
    pub fn gate(&self) -> Option<&Gate> {
        self.gate.as_deref()
    }

    /// Whether this instance has seen the ticket type sell out (and no
    /// tickets come back since): for pages, which show it at once.
    pub fn known_sold_out(&self, ticket_type_id: TicketTypeId) -> bool {
        self.sold_out.is_set(ticket_type_id)
    }

    /// Whether this instance refuses purchases of the ticket type without
    /// any read: sold out, and the keys of its orders known (for tests).
    pub fn refuses_without_reading(&self, ticket_type_id: TicketTypeId) -> bool {
        self.sold_out.knows_committed_keys(ticket_type_id)
    }

    pub fn strategy(&self) -> Strategy {
        self.strategy
    }
}

#[cfg(test)]
mod tests {
    use sqlx::postgres::PgPoolOptions;

    use super::*;

    #[tokio::test]
    async fn sales_keep_their_strategy_deadline_and_flags() {
        let db = PgPoolOptions::new()
            .connect_lazy("postgres://stampede@localhost/none?host=/nonexistent-stampede-socket")
            .unwrap();
        let sales = Sales::new(db, Strategy::Naive, EngineSettings::default())
            .with_deadline(Duration::from_millis(1234));
        assert_eq!(sales.strategy(), Strategy::Naive);
        assert_eq!(format!("{sales:?}"), "Sales { strategy: Naive, .. }");
        assert_eq!(
            sales.batcher.settings().deadline,
            Duration::from_millis(1234)
        );
        let (tt, other) = (
            TicketTypeId::from(uuid::Uuid::new_v4()),
            TicketTypeId::from(uuid::Uuid::new_v4()),
        );
        assert!(!sales.known_sold_out(tt));
        sales.sold_out.set(tt);
        assert!(sales.known_sold_out(tt));
        assert!(!sales.known_sold_out(other));
    }
}
