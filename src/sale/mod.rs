//! The purchase path, all of it: idempotency, limits, the stock decrement.
//!
//! [`Sales`] sells by one of the [`Strategy`]s. The default, `batch`
//! ([`batch`]), coalesces concurrent purchases of one ticket type into one
//! transaction; `naive` and `for-update` ([`single`]) run one transaction
//! per purchase and are kept as baselines for comparison. Every strategy
//! ends in the same conditional `UPDATE ticket_types SET remaining =
//! remaining - $n WHERE id = $1 AND remaining - $n >= 0`, with the sale
//! window (`sale_open(...)`, the SQL twin of `domain::SaleWindow`) and the
//! `sales_halted` flag, inside the transaction that writes the orders: no
//! interleaving can oversell, and any number of instances may share one
//! database (with one strategy: mixing them on one database can deadlock,
//! which Postgres resolves by failing one transaction).
//!
//! Before any transaction, one read ([`check::SaleCheck`]: the key's order,
//! if any, and the ticket type's state) replays earlier purchases and
//! refuses requests that cannot succeed, and an in-process flag
//! ([`sold_out`]) refuses purchases of a sold-out type without a
//! transaction.
//!
//! With `--redis-gate`, the optional Redis gate ([`gate`]) checks and counts
//! each purchase in Redis first: refusals are answered from Redis, admitted
//! purchases go on to the strategy (Postgres keeps the last word) and give
//! their counts back if it does not sell them.
//!
//! Cancelling orders and events is [`cancel`].

mod batch;
mod cancel;
mod check;
mod gate;
mod holds;
mod order;
mod outcome;
mod redis_baselines;
mod replay;
mod request;
mod round_trips;
mod single;
mod sold_out;
mod stock_listener;
mod strategy;

use std::{fmt, sync::Arc, time::Duration};

use sqlx::PgPool;
use time::OffsetDateTime;
use tracing::Instrument;

pub use batch::EngineSettings;
pub use cancel::{cancel, cancel_by_organizer, cancel_event};
use gate::Admission;
pub use gate::{Gate, GateError, GateRedis, GateSettings};
pub use holds::{Confirmed, EXPIRE_BATCH, confirm, expire_holds, spawn_sweeper};
pub use order::{Order, OrderRef, find, find_by_id};
pub use outcome::Purchase;
use replay::replay_by_key;
pub use request::PurchaseRequest;
use single::Locking;
use sold_out::{Flagged, SoldOut};
pub use strategy::Strategy;

use crate::{
    domain::{ConfirmKey, TicketTypeId},
    error::AppError,
    metric_handles::CounterByLabel,
    waiting_room::{DEFAULT_ENTRIES_PER_CLIENT, RoomKey, Rooms},
};

/// Purchases by outcome: `created`, `replayed` or the refusal's code.
static PURCHASES: CounterByLabel = CounterByLabel::new("stampede_purchases_total", "outcome");

/// The sale path, shared by every handler: the pool, the strategy, the
/// batch queues and the sold-out flags.
#[derive(Clone)]
pub struct Sales {
    db: PgPool,
    strategy: Strategy,
    batcher: Arc<batch::Batcher>,
    sold_out: Arc<SoldOut>,
    /// For the Redis baselines only.
    redis: Option<deadpool_redis::Pool>,
    /// The optional Redis gate in front of the strategy ([`gate`]).
    gate: Option<Arc<Gate>>,
    /// Which events have a waiting room, and the key their passes are
    /// signed with (`crate::waiting_room`).
    rooms: Rooms,
    /// Derives held orders' confirmation tokens ([`holds`]).
    confirm_key: ConfirmKey,
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
        let confirm_key = ConfirmKey::random();
        Self {
            batcher: Arc::new(batch::Batcher::new(
                db.clone(),
                settings,
                Arc::clone(&sold_out),
                confirm_key.clone(),
            )),
            db,
            strategy,
            sold_out,
            redis: None,
            gate: None,
            rooms: Rooms::new(RoomKey::random(), DEFAULT_ENTRIES_PER_CLIENT),
            confirm_key,
        }
    }

    /// The key held orders' confirmation tokens are derived with; every
    /// instance of a deployment must share it.
    pub fn with_confirm_key(mut self, key: ConfirmKey) -> Self {
        self.confirm_key = key;
        self.batcher = Arc::new(batch::Batcher::new(
            self.db.clone(),
            self.batcher.settings(),
            Arc::clone(&self.sold_out),
            self.confirm_key.clone(),
        ));
        self
    }

    pub fn confirm_key(&self) -> &ConfirmKey {
        &self.confirm_key
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
        self.batcher = Arc::new(batch::Batcher::new(
            self.db.clone(),
            settings,
            Arc::clone(&self.sold_out),
            self.confirm_key.clone(),
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

    /// Put the Redis gate ([`gate`]) in front of the strategy: purchases are
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

    /// Sell `quantity` tickets of one type to one buyer, or refuse with a reason.
    pub async fn purchase(
        &self,
        now: OffsetDateTime,
        request: &PurchaseRequest,
    ) -> Result<Purchase, AppError> {
        self.purchase_limited(now, request, |_| Ok(())).await
    }

    /// [`Self::purchase`], asking `limit` (the buyer's rate limit) first,
    /// except of a purchase refused at once because its type is known sold
    /// out: that refusal costs nothing, so it neither waits on the limiter
    /// nor spends the buyer's budget.
    pub async fn purchase_limited(
        &self,
        now: OffsetDateTime,
        request: &PurchaseRequest,
        limit: impl FnOnce(&PurchaseRequest) -> Result<(), AppError>,
    ) -> Result<Purchase, AppError> {
        let span = tracing::info_span!(
            "purchase",
            strategy = %self.strategy,
            ticket_type_id = %request.ticket_type_id,
            quantity = request.quantity.get(),
            outcome = tracing::field::Empty,
        );
        let result = self
            .purchase_inner(now, request, limit)
            .instrument(span.clone())
            .await;
        let outcome = match &result {
            Ok(Purchase::Created { .. }) => "created",
            Ok(Purchase::Replayed(_)) => "replayed",
            Err(err) => err.code(),
        };
        span.record("outcome", outcome);
        PURCHASES.increment(outcome);
        result
    }

    async fn purchase_inner(
        &self,
        now: OffsetDateTime,
        request: &PurchaseRequest,
        limit: impl FnOnce(&PurchaseRequest) -> Result<(), AppError>,
    ) -> Result<Purchase, AppError> {
        // A sell-out's refusals are most of a rush: their future stays a few
        // bytes (the other ways are boxed), so that a refusal does not move
        // kilobytes of state through every layer of the server.
        let flagged = self.sold_out.check(request);
        if flagged == Flagged::Refuse {
            // Not the key of any order of the type: nothing to replay.
            return Err(AppError::SoldOut);
        }
        // The limit before any read: a buyer over it costs Postgres nothing.
        limit(request)?;
        let checked = Box::pin(self.check_pass(now, request)).await?;
        let request = checked.as_ref().unwrap_or(request);
        if flagged == Flagged::MayReplay {
            Box::pin(self.replay_after_sell_out(now, request)).await
        } else {
            Box::pin(self.gate_then_sell(now, request)).await
        }
    }

    /// A purchase of a type this instance knows sold out: the order of a
    /// committed purchase with this key, replayed, or [`AppError::SoldOut`].
    async fn replay_after_sell_out(
        &self,
        now: OffsetDateTime,
        request: &PurchaseRequest,
    ) -> Result<Purchase, AppError> {
        // Until the flag knows the type's keys, the gate tells, without
        // counting, which requests cannot be the retry of a committed
        // purchase (their key never admitted, their buyer holding none), so
        // that only the others cost a read. The engine reads the keys of a
        // whole batch of them at once.
        if let Some(gate) = &self.gate
            && !gate.may_replay(request).await
        {
            return Err(AppError::SoldOut);
        }
        if self.strategy == Strategy::Batch {
            return self.batcher.replay_or_sold_out(now, request).await;
        }
        match replay_by_key(&self.db, request).await {
            Err(AppError::NotFound) => Err(AppError::SoldOut),
            answer => answer,
        }
    }

    /// Through the Redis gate, if there is one, then the strategy's sale.
    async fn gate_then_sell(
        &self,
        now: OffsetDateTime,
        request: &PurchaseRequest,
    ) -> Result<Purchase, AppError> {
        let Some(gate) = &self.gate else {
            return self.sell(now, request, None).await;
        };
        // The engine may begin the transaction that sells it while Redis
        // answers ([`batch::OnTheWay`]).
        let on_its_way = (self.strategy == Strategy::Batch).then(|| {
            self.batcher
                .on_its_way(request.ticket_type_id, gate.call_timeout())
        });
        let mut admission = gate.admit(request).await;
        // A refusal is not on its way (and the sale it waits for below must
        // not wait for it); "sold out" tells a batch opened ahead that no
        // more of the wave are coming.
        let on_its_way = match (&admission, on_its_way) {
            (Admission::Refused { refusal, .. }, Some(on_its_way)) => {
                if matches!(refusal, AppError::SoldOut) {
                    on_its_way.sold_out();
                }
                None
            }
            (_, on_its_way) => on_its_way,
        };
        // A sold-out answer while this instance's admitted purchases are
        // still being decided waits for them; if one was given back, the
        // purchase asks again (once).
        if let Admission::Refused {
            refusal: AppError::SoldOut,
            ..
        } = admission
            && gate.settled(request.ticket_type_id).await
        {
            admission = gate.admit(request).await;
        }
        match admission {
            Admission::Bypass | Admission::Replay => self.sell(now, request, on_its_way).await,
            // Refused from Redis; a buyer who holds tickets may be retrying
            // a committed purchase, which replays.
            Admission::Refused { refusal, holds } => {
                if matches!(refusal, AppError::SoldOut) {
                    // Redis has none left; once Postgres agrees, this
                    // instance refuses the type without asking Redis.
                    self.sold_out.suspect(request.ticket_type_id);
                }
                if !holds {
                    return Err(refusal);
                }
                match replay_by_key(&self.db, request).await {
                    Err(AppError::NotFound) => Err(refusal),
                    answer => answer,
                }
            }
            Admission::Admitted(ticket) => {
                // In a task of its own, so that a buyer who goes away
                // cannot cancel the give-back.
                let sales = self.clone();
                let in_flight = gate.in_flight(request.ticket_type_id);
                let gate = Arc::clone(gate);
                let request = request.clone();
                let sold = tokio::spawn(
                    async move {
                        let result = sales.sell(now, &request, on_its_way).await;
                        if matches!(result, Ok(Purchase::Created { .. })) {
                            drop(in_flight);
                            // Off the buyer's answer: no longer in flight.
                            tokio::spawn(
                                async move { gate.settle(&ticket).await }.in_current_span(),
                            );
                        } else {
                            gate.give_back(&ticket).await;
                            // Worth asking again only if Postgres has the
                            // ticket: not after a replay (the order stands)
                            // or a refusal for want of stock (Redis was high).
                            if let Err(refusal) = &result
                                && !matches!(
                                    refusal,
                                    AppError::SoldOut | AppError::NotEnoughLeft { .. }
                                )
                            {
                                in_flight.given_back();
                            }
                        }
                        result
                    }
                    .in_current_span(),
                );
                sold.await.unwrap_or_else(|err| {
                    Err(AppError::internal(anyhow::anyhow!(
                        "purchase task failed: {err}"
                    )))
                })
            }
        }
    }

    /// The waiting room's door, before anything is written: for an event
    /// with its room on, a valid pass that no other purchase has spent
    /// (the request then names the entry, which the order records: its
    /// unique index is the last word). `None`: the request goes on as it is.
    async fn check_pass(
        &self,
        now: OffsetDateTime,
        request: &PurchaseRequest,
    ) -> Result<Option<PurchaseRequest>, AppError> {
        let Some(event_id) = self
            .rooms
            .event_behind_room(&self.db, request.ticket_type_id)
            .await?
        else {
            // No room: nothing to spend, whatever the caller sent.
            return Ok(request.queue_entry.is_some().then(|| PurchaseRequest {
                queue_entry: None,
                ..request.clone()
            }));
        };
        let entry = self
            .rooms
            .key()
            .check_pass(event_id, request.pass.as_deref(), now)?;
        // The fast refusal of a spent pass; a retry of the purchase that
        // spent it (same buyer and key) goes on, and replays.
        let spender = sqlx::query!(
            "SELECT email, idempotency_key FROM orders WHERE queue_entry_id = $1",
            entry.get(),
        )
        .fetch_optional(&self.db)
        .await?;
        if let Some(spender) = spender
            && (spender.email != request.email.as_str()
                || spender.idempotency_key != request.idempotency_key.as_str())
        {
            return Err(AppError::PassSpent);
        }
        Ok(Some(PurchaseRequest {
            queue_entry: Some(entry),
            ..request.clone()
        }))
    }

    /// The strategy's sale, Postgres having the last word; `on_its_way`:
    /// the engine's token for a purchase through the gate.
    async fn sell(
        &self,
        now: OffsetDateTime,
        request: &PurchaseRequest,
        on_its_way: Option<batch::OnTheWay>,
    ) -> Result<Purchase, AppError> {
        let result = match self.strategy {
            Strategy::Batch => match on_its_way {
                Some(on_its_way) => {
                    self.batcher
                        .purchase_on_its_way(now, request, on_its_way)
                        .await
                }
                None => self.batcher.purchase(now, request).await,
            },
            Strategy::Naive => {
                single::purchase(&self.db, &self.confirm_key, now, request, Locking::AtTheEnd).await
            }
            Strategy::ForUpdate => {
                single::purchase(
                    &self.db,
                    &self.confirm_key,
                    now,
                    request,
                    Locking::RowLockFirst,
                )
                .await
            }
            Strategy::RedisWatch | Strategy::RedisLock => {
                let redis = self.redis.as_ref().ok_or_else(|| {
                    AppError::internal(anyhow::anyhow!("{} needs a Redis URL", self.strategy))
                })?;
                let how = if self.strategy == Strategy::RedisWatch {
                    redis_baselines::Reserve::Watch
                } else {
                    redis_baselines::Reserve::Lock
                };
                redis_baselines::purchase(&self.db, &self.confirm_key, redis, now, request, how)
                    .await
            }
        };
        if matches!(result, Err(AppError::SoldOut)) {
            self.sold_out.set(request.ticket_type_id);
        }
        result
    }
}

/// One purchase in a transaction of its own (the `naive` strategy), for
/// callers without a [`Sales`]: tests and tools. It checks no waiting-room
/// pass (that is [`Sales::purchase`]'s door); it writes `queue_entry` as given.
/// A hold it writes has a confirmation token of a throwaway key: only its
/// expiry (or a cancel) ends it.
pub async fn purchase(
    db: &PgPool,
    now: OffsetDateTime,
    request: &PurchaseRequest,
) -> Result<Purchase, AppError> {
    single::purchase(db, &ConfirmKey::random(), now, request, Locking::AtTheEnd).await
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
