//! Rebuilding the counters from Postgres: one rebuild at a time per ticket
//! type in this instance ([`Gate::rebuild_once`]), what Postgres announces
//! ([`StockWatcher`]), and the reconciler that rebuilds stale and lately
//! sold ticket types ([`reconcile`]). The rules are in the gate's own
//! documentation (**Rebuilds**, **Only when quiet**).

use std::{
    sync::{Arc, PoisonError, Weak},
    time::{Duration, Instant},
};

use tokio::sync::Notify;
use uuid::Uuid;

use super::{
    local::{QUIET_RETRY, Rebuild, RebuildEnd, Rebuilt},
    settings::GateError,
    state::{Gate, millis, unix_ms},
};
use crate::{domain::TicketTypeId, sale::stock_listener::StockWatcher};

/// A ticket type not bought for this long is no longer reconciled.
const FORGET_AFTER: Duration = Duration::from_secs(600);

impl Gate {
    /// Rebuild unless another task of this instance just did, waiting for
    /// it. The tasks that ask while one rebuilds wait for its end together
    /// and take its answer: handing a lock from one to the next, a burst's
    /// first wave queued for seconds behind each other's wake-ups. If it
    /// failed, one of them tries again, and so on: a waiter gives up after
    /// the connect budget (the rebuilding task has its own per call).
    pub(super) async fn rebuild_once(
        &self,
        id: TicketTypeId,
        mode: Rebuild,
    ) -> Result<Rebuilt, GateError> {
        let asked = Instant::now();
        let slot = {
            let mut rebuilding = self
                .rebuilding
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            Arc::clone(rebuilding.entry(id).or_default())
        };
        let deadline = tokio::time::Instant::now() + self.settings.connect_timeout();
        let mut since = asked;
        let mut finished = slot.finished.subscribe();
        loop {
            let running = tokio::select! {
                biased;
                Ok(end) = finished.wait_for(|end| end.is_some_and(|end| end.at > since)) => {
                    if let Some(answer) = end.and_then(|end| end.answer) {
                        return Ok(answer);
                    }
                    // It failed: this task or another tries again.
                    since = Instant::now();
                    continue;
                }
                running = slot.running.lock() => running,
                () = tokio::time::sleep_until(deadline) => {
                    return Err(GateError::Timeout(self.settings.connect_timeout()));
                }
            };
            {
                let local = self.local();
                if !local.stale.contains_key(&id)
                    && local.rebuilt.get(&id).is_some_and(|at| *at > asked)
                {
                    return Ok(Rebuilt::Done);
                }
            }
            let rebuilt = self.rebuild(id, mode).await;
            slot.finished.send_replace(Some(RebuildEnd {
                at: Instant::now(),
                answer: rebuilt.as_ref().ok().copied(),
            }));
            drop(running);
            return rebuilt;
        }
    }

    /// The stock hash from one Postgres snapshot, under a new generation.
    async fn rebuild(&self, id: TicketTypeId, mode: Rebuild) -> Result<Rebuilt, GateError> {
        // Unmarked first: stock returned during the rebuild marks it again.
        let marked = self.local().stale.remove(&id);
        let rebuilt = self.rebuild_from_postgres(id, mode).await;
        let mut local = self.local();
        match &rebuilt {
            Ok(Rebuilt::Busy) => local.mark(id, Rebuild::WhenQuiet),
            Ok(_) => {
                local.rebuilt.insert(id, Instant::now());
            }
            Err(_) => {
                local.mark(id, mode);
                if let Some(marked) = marked {
                    local.mark(id, marked);
                }
            }
        }
        rebuilt
    }

    async fn rebuild_from_postgres(
        &self,
        id: TicketTypeId,
        mode: Rebuild,
    ) -> Result<Rebuilt, GateError> {
        let stock = self.stock_key(id);
        let inflight = self.inflight_key(id);
        let timeout = self.settings.connect_timeout();
        // Before the snapshot: which admissions it will have seen settled.
        let mut seq = String::new();
        let mut cutoff = 0;
        if mode == Rebuild::WhenQuiet {
            cutoff = unix_ms().saturating_sub(millis(self.settings.settle_within));
            // `seq` first: an admission between the two reads then shows
            // as a changed `seq` when the script writes.
            let read: Option<String> = self
                .redis(timeout, async |conn| {
                    redis::cmd("HGET")
                        .arg(&stock)
                        .arg("seq")
                        .query_async(conn)
                        .await
                })
                .await?;
            let in_flight: i64 = self
                .redis(timeout, async |conn| {
                    let fresh = format!("({cutoff}");
                    redis::cmd("ZCOUNT")
                        .arg(&inflight)
                        .arg(fresh)
                        .arg("+inf")
                        .query_async(conn)
                        .await
                })
                .await?;
            if in_flight > 0 {
                return Ok(Rebuilt::Busy);
            }
            seq = read.unwrap_or_else(|| "0".to_owned());
        }
        crate::sale::round_trips::postgres_round("gate_rebuild");
        let Some(row) = sqlx::query_file!("sql/sale/gate_rebuild.sql", id.get())
            .fetch_optional(&self.db)
            .await?
        else {
            return Ok(Rebuilt::Unknown);
        };
        let mut invocation = self.rebuild.prepare_invoke();
        invocation
            .key(&stock)
            .key(&inflight)
            .arg(Uuid::new_v4().to_string())
            .arg(row.remaining)
            .arg(row.max_per_buyer)
            .arg(row.max_per_order)
            .arg(self.settings.record_ttl.as_secs().max(1))
            .arg(match mode {
                Rebuild::IfMissing => "missing",
                Rebuild::WhenQuiet => "quiet",
                Rebuild::Always => "always",
            })
            .arg(seq)
            .arg(cutoff);
        for (buyer, held) in row.buyer_keys.iter().zip(&row.held) {
            invocation.arg(format!("b:{buyer}")).arg(held);
        }
        let written: i64 = self
            .redis(timeout, async |conn| invocation.invoke_async(conn).await)
            .await?;
        match written {
            1 => {
                metrics::counter!("stampede_gate_rebuilds_total").increment(1);
                tracing::debug!(ticket_type_id = %id, remaining = row.remaining, "gate rebuilt");
                Ok(Rebuilt::Done)
            }
            2 => Ok(Rebuilt::Busy),
            _ => Ok(Rebuilt::Done),
        }
    }
}

impl StockWatcher for Gate {
    fn returned(&self, ticket_type_id: TicketTypeId) {
        let mut local = self.local();
        if local.seen.contains_key(&ticket_type_id) || local.rebuilt.contains_key(&ticket_type_id) {
            local.mark(ticket_type_id, Rebuild::WhenQuiet);
            drop(local);
            self.wake.notify_one();
        }
    }

    /// Built ahead: a sale just published is counted before its rush.
    fn scheduled(&self, ticket_type_id: TicketTypeId) {
        if self.settings.build_ahead.is_none() {
            return;
        }
        self.local().mark(ticket_type_id, Rebuild::WhenQuiet);
        self.wake.notify_one();
    }

    fn missed(&self) {
        let mut local = self.local();
        let seen: Vec<TicketTypeId> = local.seen.keys().copied().collect();
        for id in seen {
            local.mark(id, Rebuild::WhenQuiet);
        }
        drop(local);
        self.wake.notify_one();
    }
}

/// Rebuild stale ticket types when woken, and every ticket type this
/// instance sold lately every `reconcile_every`; a quiet rebuild that found
/// purchases in flight is retried every [`QUIET_RETRY`]. Ends with the gate.
pub(super) async fn reconcile(gate: Weak<Gate>, wake: Arc<Notify>) {
    let Some(every) = gate.upgrade().map(|g| g.settings.reconcile_every) else {
        return;
    };
    let mut next = tokio::time::Instant::now() + every;
    let mut retry = None;
    loop {
        let periodic = tokio::select! {
            () = tokio::time::sleep_until(next) => true,
            () = wake.notified() => false,
            () = tokio::time::sleep_until(retry.unwrap_or(next)), if retry.is_some() => false,
        };
        let Some(gate) = gate.upgrade() else { return };
        let ids: Vec<(TicketTypeId, Rebuild)> = {
            let mut local = gate.local();
            if local.down_until.is_some_and(|until| Instant::now() < until) {
                Vec::new()
            } else if periodic {
                local.seen.retain(|_, at| at.elapsed() < FORGET_AFTER);
                let seen: Vec<TicketTypeId> = local.seen.keys().copied().collect();
                seen.into_iter()
                    .map(|id| {
                        let marked = local.stale.get(&id).copied();
                        (
                            id,
                            marked.unwrap_or(Rebuild::WhenQuiet).max(Rebuild::WhenQuiet),
                        )
                    })
                    .collect()
            } else {
                local.stale.iter().map(|(id, mode)| (*id, *mode)).collect()
            }
        };
        if periodic {
            next = tokio::time::Instant::now() + every;
            gate.build_ahead().await;
        }
        retry = None;
        for (id, mode) in ids {
            match gate.rebuild_once(id, mode).await {
                Ok(Rebuilt::Busy) => retry = Some(tokio::time::Instant::now() + QUIET_RETRY),
                Ok(_) => {}
                Err(err) => {
                    gate.failed(&err);
                    break;
                }
            }
        }
    }
}
