//! The optional Redis gate (issue 9, `--redis-gate`): shed the burst before
//! Postgres. Under 100,000 buyers for 100 tickets, about 100 purchases reach
//! the sale transaction; the others are refused from Redis.
//!
//! Per ticket type, one Redis hash `<prefix>{tt:<id>}:stock` holds a
//! generation token (`gen`), what is left (`left`), the limits (`limit` per
//! buyer, `per_order`) and each buyer's count (`b:<buyer key>`, the folded
//! [`BuyerKey`]); per buyer and idempotency key, an admission record
//! `<prefix>{tt:<id>}:key:…` (`<gen>:<quantity>:<buyer field>`, with a TTL).
//! Every key of a ticket type shares the hash tag `{tt:<id>}`, so each script
//! touches one slot (Redis Cluster).
//!
//! One script per purchase ([`ADMIT`]), atomic in Redis: the admission
//! record first (a key admitted before is a replay: it goes to Postgres and
//! is not counted again, so one buyer's repeated clicks cannot drain the
//! counter), then the order limit, the buyer's count against the ticket
//! type's limit, what is left; then both counts are decremented and the
//! record written. Only admitted purchases (and replays) go on to Postgres,
//! whose transaction keeps the last word: the conditional `UPDATE` runs
//! whatever Redis said. A purchase admitted but not sold by Postgres gives
//! its counts back, once ([`GIVE_BACK`] deletes the record it consumes).
//! The event-wide limit per buyer stays in Postgres alone.
//!
//! **Rebuilds.** Redis is never the source of truth: the hash is rebuilt
//! from one Postgres snapshot ([`REBUILD`], `sql/sale/gate_rebuild.sql`)
//! when it is missing (first purchase, Redis restarted or flushed, expired),
//! when Postgres announces returned stock (`stampede_stock_returned`: a
//! cancellation, a capacity raised), when Redis comes back after a failure,
//! and every `reconcile_every` for the ticket types this instance sells.
//!
//! **Built ahead.** A rebuild at a rush's first purchase makes the whole
//! first wave wait for it (a Postgres read and a script, on a loaded
//! machine: tens of milliseconds). So the counters of a published sale are
//! built before it opens (`build_ahead`): when Postgres announces it
//! published or moved (`stampede_sale_scheduled`, migrations/0019), at
//! start-up, and every `reconcile_every` for the sales that open within
//! `build_ahead` or are open and not sold out ([`ahead`]).
//!
//! **Only when quiet.** A snapshot does not count the purchases admitted
//! but not yet committed: a rebuild under them would set `left` as if their
//! tickets were still for sale, and Redis would admit them twice (Postgres
//! refuses the surplus, but the burst it was to shed reaches it). So every
//! admission bumps the hash's `seq` and joins an in-flight set (per type,
//! `<prefix>{tt:<id>}:inflight`) that it leaves once settled: after its
//! commit (a `ZREM`, off the buyer's answer) or in its give-back. The
//! periodic and returned-stock rebuilds read `seq` and the set before the
//! snapshot and write only if the set was empty and `seq` unchanged by the
//! time they write (atomic in the script): then every admission before the
//! snapshot had committed or been given back, and none came after, so the
//! snapshot is exact. Otherwise they are retried every [`QUIET_RETRY`]
//! until the burst has settled; meanwhile Redis may be low (returned stock
//! not yet on sale), never high. An admission never settled (its instance
//! killed, its `ZREM` lost) stops holding them back after `settle_within`.
//! Two rebuilds are not held back: the one of a missing hash (there is
//! nothing to keep) and the one after Redis comes back from a failure
//! (purchases went to Postgres uncounted meanwhile: Redis may be high).
//!
//! **The generation rule.** Each rebuild writes a fresh random generation;
//! each admission record carries the generation it was counted in. A
//! give-back adds its counts back only if the record's generation is still
//! the hash's: a rebuild since has read Postgres without the admission, so
//! adding it back would count it twice. So Redis is never lower than
//! Postgres except by admissions that will neither commit nor be given back
//! (an instance killed between the gate and the commit, a give-back lost
//! while Redis was unreachable, a rebuild that read before a cancellation
//! and wrote after the next one): the next periodic rebuild, within
//! `reconcile_every` once the sale is quiet, puts those tickets back on sale.
//!
//! **A sold-out answer waits for the sale.** Redis says "sold out" once
//! every ticket is admitted, before Postgres has decided the admitted
//! purchases. Such a refusal waits (up to 1 s, [`selling`]) until this
//! instance's admitted purchases of the type are decided; if one was
//! refused for a reason of its own (a limit only Postgres knows) and given
//! back, the refused purchase asks Redis again. So "sold out" is final, and
//! under a burst the refused do not come straight back for the CPU that
//! the commits need.
//!
//! **Redis Cluster.** With [`GateRedis::Cluster`] the same scripts run on a
//! cluster (redis-rs' cluster client): each touches the keys of one ticket
//! type, one hash slot, so one master; EVALSHA goes to that master, and a
//! script it does not know yet is loaded on every master (NOSCRIPT
//! fallback). Ticket types spread over the masters by their ids.
//!
//! **Redis down or slow.** Every call has a short timeout; on any failure
//! the purchase goes to Postgres alone, counted
//! (`stampede_gate_total{outcome="fallback"}`). An error, or
//! [`TIMEOUTS_TO_TRIP`] timeouts in a row, is logged once and the gate is
//! skipped for `retry_after`; when Redis answers again, the ticket types
//! are rebuilt before they are admitted. A timed-out admission may have
//! been counted in Redis: if Postgres then sells it, both agree; if not,
//! Redis stays low by it until the next periodic rebuild.

mod admission;
mod ahead;
mod calls;
mod connection;
mod local;
mod rebuild;
mod scripts;
mod selling;
mod settings;
mod state;
#[cfg(test)]
mod tests;

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU32, AtomicU64},
    },
};

use redis::Script;
use sqlx::PgPool;
use tokio::sync::Notify;

pub(super) use admission::Admission;
use connection::Client;
use local::Local;
use rebuild::reconcile;
use scripts::{ADMIT, GIVE_BACK, MAY_REPLAY, REBUILD};
use selling::SellingByType;
pub use settings::{GateError, GateRedis, GateSettings};
pub use state::Gate;

use super::stock_listener;
use crate::error::AppError;

impl Gate {
    /// Must be called inside a Tokio runtime: it starts the reconciler and
    /// a listener for returned stock. Connects lazily.
    pub fn start(
        db: PgPool,
        redis: GateRedis,
        settings: GateSettings,
    ) -> Result<Arc<Self>, AppError> {
        let redis = Client::open(&redis, &settings).map_err(AppError::internal)?;
        let gate = Arc::new(Self {
            db: db.clone(),
            redis,
            conn: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
            settings,
            admit: Script::new(ADMIT),
            give_back: Script::new(GIVE_BACK),
            may_replay: Script::new(MAY_REPLAY),
            rebuild: Script::new(REBUILD),
            local: Mutex::new(Local::default()),
            rebuilding: Mutex::new(HashMap::new()),
            wake: Arc::new(Notify::new()),
            degraded: AtomicBool::new(false),
            timeouts_in_a_row: AtomicU32::new(0),
            admitted: AtomicU64::new(0),
            selling: SellingByType::default(),
        });
        tokio::spawn(stock_listener::listen(db, Arc::downgrade(&gate)));
        tokio::spawn(reconcile(Arc::downgrade(&gate), Arc::clone(&gate.wake)));
        let warming = Arc::downgrade(&gate);
        tokio::spawn(async move {
            if let Some(gate) = warming.upgrade() {
                gate.warm_up().await;
            }
        });
        Ok(gate)
    }

    /// Connect and load the scripts before the first purchase, so that the
    /// first wave of a burst neither waits for the connection nor sends
    /// each script's whole text after a NOSCRIPT. A failure changes
    /// nothing: the first purchases connect and load as before.
    async fn warm_up(&self) {
        let scripts = [
            &self.admit,
            &self.give_back,
            &self.may_replay,
            &self.rebuild,
        ];
        let loaded = self
            .redis(self.settings.connect_timeout(), async |conn| {
                for script in scripts {
                    script.prepare_invoke().load_async(conn).await?;
                }
                Ok(())
            })
            .await;
        if let Err(err) = loaded {
            tracing::debug!(error = %err, "Redis gate: not warmed up; the first purchase connects");
        }
        self.build_ahead().await;
    }
}
