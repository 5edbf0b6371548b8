//! One Redis call on the shared connection, bounded in time, and what
//! its failures do: after an error, or too many timeouts in a row, the gate
//! stands aside for `retry_after`; once Redis answers again, the ticket
//! types are rebuilt before they are admitted.

use std::{
    sync::{PoisonError, atomic::Ordering},
    time::{Duration, Instant},
};

use super::{
    connection::{Connection, Connections},
    local::Rebuild,
    settings::GateError,
    state::Gate,
};
use crate::domain::TicketTypeId;

/// Timeouts in a row that take the gate out of the way for `retry_after`.
/// One late answer sends only its own purchase to Postgres: under a burst on
/// a busy machine a few answers come late while Redis is fine, and standing
/// aside for everyone then sent the whole first wave to Postgres. A Redis
/// that has stopped answering times out every call, and trips it at once.
const TIMEOUTS_TO_TRIP: u32 = 16;

impl Gate {
    /// One call on the shared connection, within `timeout` (connecting
    /// included). On an error the connection is dropped, to be made again;
    /// on a timeout it is kept (its other calls are answered on it, and a
    /// late answer to this one is discarded).
    pub(super) async fn redis<T>(
        &self,
        timeout: Duration,
        call: impl AsyncFnOnce(&mut Connection) -> redis::RedisResult<T>,
    ) -> Result<T, GateError> {
        let connect = self.settings.connect_timeout();
        let answer = async {
            let mut conn = tokio::time::timeout(connect, self.connection())
                .await
                .map_err(|_| GateError::Timeout(connect))??;
            tokio::time::timeout(timeout, call(&mut conn))
                .await
                .map_err(|_| GateError::Timeout(timeout))?
                .map_err(GateError::from)
        }
        .await;
        if let Err(err) = &answer
            && !matches!(err, GateError::Timeout(_))
        {
            *self.conn_slot() = None;
        }
        answer
    }

    async fn connection(&self) -> redis::RedisResult<Connection> {
        if let Some(conns) = &*self.conn_slot() {
            return Ok(conns.pick());
        }
        let _one_connect = self.connecting.lock().await;
        if let Some(conns) = &*self.conn_slot() {
            return Ok(conns.pick());
        }
        let made = self.redis.connect().await?;
        let conn = made.pick();
        *self.conn_slot() = Some(made);
        Ok(conn)
    }

    fn conn_slot(&self) -> std::sync::MutexGuard<'_, Option<Connections>> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn failed(&self, err: &GateError) {
        metrics::counter!("stampede_gate_errors_total").increment(1);
        if matches!(err, GateError::Timeout(_))
            && self.timeouts_in_a_row.fetch_add(1, Ordering::Relaxed) + 1 < TIMEOUTS_TO_TRIP
        {
            return;
        }
        metrics::gauge!("stampede_gate_up").set(0.0);
        if !self.degraded.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                error = %err,
                retry_after_ms = self.settings.retry_after.as_millis() as u64,
                "Redis gate unavailable: purchases go to Postgres alone until it answers"
            );
        }
        self.local().down_until = Some(Instant::now() + self.settings.retry_after);
    }

    /// Redis answered: if it had failed, rebuild before admitting again
    /// (it may have lost its data, and sales went uncounted meanwhile).
    pub(super) fn answered(&self) {
        self.timeouts_in_a_row.store(0, Ordering::Relaxed);
        if self.degraded.swap(false, Ordering::Relaxed) {
            tracing::info!("Redis gate back: rebuilding its counters from Postgres");
            metrics::gauge!("stampede_gate_up").set(1.0);
            let mut local = self.local();
            let seen: Vec<TicketTypeId> = local.seen.keys().copied().collect();
            for id in seen {
                local.mark(id, Rebuild::Always);
            }
            drop(local);
            self.wake.notify_one();
        }
    }
}
