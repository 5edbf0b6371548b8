//! What the gate is, in this instance: its Redis client and connection,
//! its scripts, what it keeps of each ticket type ([`super::local`]), its
//! admitted purchases in flight ([`super::selling`]), and the keys of a
//! ticket type in Redis (one hash tag each, one Redis Cluster slot).

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use redis::Script;
use sqlx::PgPool;
use tokio::sync::Notify;

use super::{
    connection::{Client, Connections},
    local::{Local, RebuildSlot},
    selling::{InFlight, SellingByType},
    settings::GateSettings,
};
use crate::{domain::TicketTypeId, sale::request::PurchaseRequest};

/// The Redis gate in front of the engine (the rules are in `super`, the
/// module's own file), made by [`Gate::start`].
pub struct Gate {
    pub(super) db: PgPool,
    pub(super) redis: Client,
    /// One multiplexed connection for all purchases (concurrent calls are
    /// pipelined on it); dropped on an error (not on a mere timeout) and
    /// made again on demand. Cloned under a lock never held across an
    /// await: an async mutex here made every call of a burst queue behind
    /// the others' wake-ups.
    pub(super) conn: Mutex<Option<Connections>>,
    /// One connect at a time.
    pub(super) connecting: tokio::sync::Mutex<()>,
    pub(super) settings: GateSettings,
    pub(super) admit: Script,
    pub(super) give_back: Script,
    pub(super) may_replay: Script,
    pub(super) rebuild: Script,
    pub(super) local: Mutex<Local>,
    /// One rebuild at a time per ticket type in this instance.
    pub(super) rebuilding: Mutex<HashMap<TicketTypeId, Arc<RebuildSlot>>>,
    /// Wakes the reconciler for stale ticket types.
    pub(super) wake: Arc<Notify>,
    /// Redis failed and has not answered since (logged once per outage).
    pub(super) degraded: AtomicBool,
    /// Calls timed out since the last answer.
    pub(super) timeouts_in_a_row: AtomicU32,
    pub(super) admitted: AtomicU64,
    /// Per ticket type, this instance's admitted purchases that Postgres
    /// has not decided yet ([`InFlight`]).
    pub(super) selling: SellingByType,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Gate {
    /// Purchases admitted so far by this instance (what went on to Postgres
    /// counted), for tests and benchmarks.
    pub fn admitted(&self) -> u64 {
        self.admitted.load(Ordering::Relaxed)
    }

    /// Whether purchases skip the gate now (Redis failed, or timed out
    /// `TIMEOUTS_TO_TRIP` times in a row, [`super::calls`], less than `retry_after` ago),
    /// for tests and benchmarks.
    pub fn standing_aside(&self) -> bool {
        self.local()
            .down_until
            .is_some_and(|until| Instant::now() < until)
    }

    pub(super) fn local(&self) -> std::sync::MutexGuard<'_, Local> {
        self.local.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn stock_key(&self, id: TicketTypeId) -> String {
        format!("{}{{tt:{id}}}:stock", self.settings.prefix)
    }

    pub(super) fn inflight_key(&self, id: TicketTypeId) -> String {
        format!("{}{{tt:{id}}}:inflight", self.settings.prefix)
    }

    pub(super) fn record_key(&self, request: &PurchaseRequest) -> String {
        let email = request.email.as_str();
        format!(
            "{}{{tt:{}}}:key:{}:{email}:{}",
            self.settings.prefix,
            request.ticket_type_id,
            email.len(),
            request.idempotency_key.as_str(),
        )
    }

    /// Each purchase's call waits this long at most.
    pub(in crate::sale) fn call_timeout(&self) -> Duration {
        self.settings.timeout
    }

    /// An admitted purchase on its way to Postgres, until dropped.
    pub(in crate::sale) fn in_flight(&self, ticket_type_id: TicketTypeId) -> InFlight {
        self.selling.in_flight(ticket_type_id)
    }

    /// Wait until Postgres has decided this instance's admitted purchases
    /// of the type (within a second); whether any was given back meanwhile
    /// (Redis has stock again: worth asking again). See
    /// [`SellingByType::settled`].
    pub(in crate::sale) async fn settled(&self, ticket_type_id: TicketTypeId) -> bool {
        self.selling.settled(ticket_type_id).await
    }
}

/// Now, as the in-flight set scores admissions. Instances' clocks need to
/// agree only to well within `settle_within`.
pub(super) fn unix_ms() -> u64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    millis(since_epoch)
}

pub(super) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
