//! The purchase path, all of it: idempotency, limits, the stock decrement.
//!
//! A purchase ([`Sales::purchase`]) goes through five stages, in this
//! order; each may answer it, and this file reads them top-down:
//!
//! 1. **flag** ([`sold_out`]): a ticket type this instance knows sold out
//!    refuses with no I/O at all, unless the request may be the retry of a
//!    committed purchase, whose order is then replayed ([`after_sell_out`]);
//! 2. **limit**: the buyer's rate limit (the caller's), before any read;
//! 3. **pass** ([`pass`]): for an event with its waiting room on, a valid
//!    pass that no other purchase has spent;
//! 4. **gate** ([`through_gate`], [`gate`]): with `--redis-gate`, Redis
//!    checks and counts the purchase first and answers the refusals;
//! 5. **engine** ([`engine`], [`batch`]): Postgres sells and has the last
//!    word. Concurrent purchases of one ticket type are coalesced into one
//!    transaction whose conditional `UPDATE ticket_types SET remaining =
//!    remaining - $n WHERE id = $1 AND remaining - $n >= 0`, with the sale
//!    window (`sale_open(...)`, the SQL twin of `domain::SaleWindow`) and
//!    the `sales_halted` flag, cannot oversell under any interleaving, with
//!    any number of instances on one database.
//!
//! Beside the path: [`Sales`] is built in [`sales`]; the [`Strategy`] flag
//! ([`strategy`]) swaps the engine for a baseline kept for comparison
//! ([`baselines`]: one strategy per database, as mixing them can deadlock);
//! [`single`] is one purchase in one transaction (the engine's fallback and
//! the baselines' base), behind its pre-check ([`check`]); held orders are
//! [`holds`], cancelling orders and events is [`cancel`].

mod after_sell_out;
mod baselines;
mod batch;
mod cancel;
mod check;
mod engine;
mod gate;
mod holds;
mod order;
mod outcome;
mod pass;
mod replay;
mod request;
mod round_trips;
mod sales;
mod single;
mod sold_out;
mod stock_listener;
mod strategy;
mod through_gate;

use sqlx::PgPool;
use time::OffsetDateTime;
use tracing::Instrument;

pub use batch::EngineSettings;
pub use cancel::{cancel, cancel_by_organizer, cancel_event};
pub use gate::{Gate, GateError, GateRedis, GateSettings};
pub use holds::{
    Confirmed, EXPIRE_BATCH, HoldRules, Holding, confirm, expire_holds, spawn_sweeper,
};
pub use order::{Order, OrderRef, find, find_by_id};
pub use outcome::Purchase;
pub use request::PurchaseRequest;
pub use sales::Sales;
use single::Locking;
use sold_out::Flagged;
pub use strategy::Strategy;

use crate::{domain::ConfirmKey, error::AppError, metric_handles::CounterByLabel};

/// Purchases by outcome: `created`, `replayed` or the refusal's code.
static PURCHASES: CounterByLabel = CounterByLabel::new("stampede_purchases_total", "outcome");

impl Sales {
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
            .through_the_stages(now, request, limit)
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

    /// flag → limit → pass → gate → engine.
    async fn through_the_stages(
        &self,
        now: OffsetDateTime,
        request: &PurchaseRequest,
        limit: impl FnOnce(&PurchaseRequest) -> Result<(), AppError>,
    ) -> Result<Purchase, AppError> {
        // A sell-out's refusals are most of a rush: their future stays a few
        // bytes (the other ways are boxed), so that a refusal does not move
        // kilobytes of state through every layer of the server.

        // 1. flag: a type known sold out, and not the key of any of its
        //    orders: nothing to replay.
        let flagged = self.sold_out.check(request);
        if flagged == Flagged::Refuse {
            return Err(AppError::SoldOut);
        }
        // 2. limit: before any read, so a buyer over it costs Postgres nothing.
        limit(request)?;
        // 3. pass: the waiting room's door; a checked pass names its entry.
        let checked = Box::pin(self.check_pass(now, request)).await?;
        let request = checked.as_ref().unwrap_or(request);
        // 1, continued: sold out, but maybe the retry of a committed
        //    purchase: replayed or refused, never sold.
        if flagged == Flagged::MayReplay {
            return Box::pin(self.replay_after_sell_out(now, request)).await;
        }
        // 4. gate: with `--redis-gate`, Redis counts first and answers the
        //    refusals; what it admits goes on, given back unless sold.
        // 5. engine: Postgres sells, and has the last word.
        Box::pin(self.gate_then_sell(now, request)).await
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
    let holding = Holding {
        key: ConfirmKey::random(),
        rules: HoldRules::default(),
    };
    single::purchase(db, &holding, now, request, Locking::AtTheEnd).await
}
