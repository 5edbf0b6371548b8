//! The engine's settings: batch size, queue bound, deadline, idleness.

use std::time::Duration;

use crate::sale::HoldRules;

#[derive(Debug, Clone, Copy)]
pub struct EngineSettings {
    /// Purchases sold in one transaction at most.
    pub max_batch: usize,
    /// Purchases waiting per ticket type at most; beyond, 503 at once.
    pub queue_capacity: usize,
    /// How long a sold-out flag stands without news from Postgres.
    pub sold_out_lifetime: Duration,
    /// A purchase not sold within this of its arrival is refused (503) and
    /// never written: the batch waits for the row and runs its statements
    /// under a lock and statement timeout that end by the earliest deadline
    /// in it. Keep it below the request timeout, so that no purchase commits
    /// after its buyer was told 503.
    pub deadline: Duration,
    /// A ticket type's worker without work for this long stops (a new one
    /// starts on demand).
    pub idle_worker: Duration,
    /// Holds for unproven mailboxes: their first window and their cap per
    /// client address.
    pub holds: HoldRules,
}

impl Default for EngineSettings {
    fn default() -> Self {
        Self {
            max_batch: 512,
            queue_capacity: 4096,
            sold_out_lifetime: Duration::from_secs(2),
            deadline: Duration::from_secs(10),
            idle_worker: Duration::from_secs(30),
            holds: HoldRules::default(),
        }
    }
}
