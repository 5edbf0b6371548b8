//! What the gate keeps of each ticket type in this instance, beside
//! Redis: when it was last bought, whether its counters are to be rebuilt
//! and how ([`Rebuild`]), when they last were, the one rebuild at a time
//! ([`RebuildSlot`]), and whether Redis is down. The rebuilds themselves
//! are `super::rebuild`.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use crate::domain::TicketTypeId;

#[derive(Debug, Default)]
pub(super) struct Local {
    /// Ticket types bought through this instance, and when last.
    pub(super) seen: HashMap<TicketTypeId, Instant>,
    /// To rebuild, and how: [`Rebuild::Always`] before the next admission,
    /// [`Rebuild::WhenQuiet`] as soon as no purchase is in flight.
    pub(super) stale: HashMap<TicketTypeId, Rebuild>,
    /// A purchase tried a quiet rebuild of the type: other purchases do
    /// not try again before then (the reconciler does, at its own pace).
    pub(super) busy_until: HashMap<TicketTypeId, Instant>,
    /// When each was last rebuilt by this instance.
    pub(super) rebuilt: HashMap<TicketTypeId, Instant>,
    /// Skip the gate until then (Redis failed).
    pub(super) down_until: Option<Instant>,
}

impl Local {
    /// Mark a type to rebuild; the stronger mode wins.
    pub(super) fn mark(&mut self, id: TicketTypeId, mode: Rebuild) {
        let entry = self.stale.entry(id).or_insert(mode);
        *entry = (*entry).max(mode);
    }
}

/// How a rebuild treats the stock hash that is there, weakest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Rebuild {
    /// The hash was found missing: build it unless another instance has.
    IfMissing,
    /// Periodic or stock returned: replace it with Postgres's truth once no
    /// purchase is in flight (until then Redis is at most low).
    WhenQuiet,
    /// Redis is back after a failure (it may be high): replace it now.
    Always,
}

/// What a rebuild did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rebuilt {
    /// Written, or left to another instance's (or task's) rebuild.
    Done,
    /// Not written: purchases are in flight ([`Rebuild::WhenQuiet`]).
    Busy,
    /// The ticket type is not in Postgres.
    Unknown,
}

/// One ticket type's rebuilds in this instance.
#[derive(Debug, Default)]
pub(super) struct RebuildSlot {
    /// Held by the task that rebuilds.
    pub(super) running: tokio::sync::Mutex<()>,
    /// How the last rebuild ended, for the tasks that waited for it.
    pub(super) finished: tokio::sync::watch::Sender<Option<RebuildEnd>>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct RebuildEnd {
    pub(super) at: Instant,
    /// `None`: it failed.
    pub(super) answer: Option<Rebuilt>,
}

/// How soon a quiet rebuild that found purchases in flight is tried again.
pub(super) const QUIET_RETRY: Duration = Duration::from_millis(100);
