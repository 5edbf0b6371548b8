//! The gate's counters built ahead of the rush (see "Built ahead" in the
//! parent module): the published sales that open soon or are open, read
//! from Postgres, and those missing in Redis built.

use std::time::Instant;

use super::{
    local::{Rebuild, Rebuilt},
    state::Gate,
};
use crate::domain::TicketTypeId;

/// The most sales whose counters are built ahead, soonest to open first.
const AHEAD_MAX: i64 = 1000;

impl Gate {
    /// The counters of the published sales that open within `build_ahead`
    /// or are open, not sold out: those missing in Redis are built from
    /// Postgres, so that a rush's first wave does not wait for the rebuild
    /// (a Postgres read and a script, under the wave's load). Those this
    /// instance built or found within `reconcile_every` are skipped; the
    /// others cost one `EXISTS` each.
    pub(super) async fn build_ahead(&self) {
        let Some(window) = self.settings.build_ahead else {
            return;
        };
        if self.standing_aside() {
            return;
        }
        crate::sale::round_trips::postgres_round("gate_ahead");
        let ids =
            sqlx::query_file_scalar!("sql/sale/gate_ahead.sql", window.as_secs_f64(), AHEAD_MAX)
                .fetch_all(&self.db)
                .await;
        let ids = match ids {
            Ok(ids) => ids,
            Err(err) => {
                tracing::debug!(error = %err, "Redis gate: the sales to build ahead not read");
                return;
            }
        };
        for id in ids.into_iter().map(TicketTypeId::from) {
            let known = {
                let local = self.local();
                local.stale.contains_key(&id)
                    || local
                        .rebuilt
                        .get(&id)
                        .is_some_and(|at| at.elapsed() < self.settings.reconcile_every)
            };
            if known {
                continue;
            }
            let stock = self.stock_key(id);
            let present = self
                .redis(self.settings.connect_timeout(), async |conn| {
                    redis::cmd("EXISTS")
                        .arg(&stock)
                        .query_async::<bool>(conn)
                        .await
                })
                .await;
            let built = match present {
                Ok(true) => {
                    self.local().rebuilt.insert(id, Instant::now());
                    Ok(Rebuilt::Done)
                }
                Ok(false) => self.rebuild_once(id, Rebuild::IfMissing).await,
                Err(err) => Err(err),
            };
            if let Err(err) = built {
                self.failed(&err);
                return;
            }
        }
    }
}
