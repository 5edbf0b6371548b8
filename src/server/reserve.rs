//! A reserve of descriptors for health checks: the site's connections stop
//! short of the open-file limit, so that when many clients hold every
//! connection the balancer's probes (`/healthz`, `/readyz`) still get in
//! and are answered. A connection accepted past the cap joins the reserve
//! (a few dozen at most): it is served for the health routes only, each
//! answer closing it, and anything else gets 503 at once. Past the reserve
//! too, a new connection is refused with 503 before any read.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

/// Connections the reserve takes at most (each one probe at a time).
pub(super) const HEALTH_CONNECTIONS: usize = 32;
/// Descriptors kept below the open-file limit: the reserve, the listener,
/// the pool's connections, logs and files, and a margin: 256, or a
/// sixteenth of the limit if more, but at most a quarter of it.
const KEPT_FREE: u64 = 256;

/// Whether a request may be served on a reserve connection.
pub(super) fn is_health_check(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz")
}

/// The site's connection cap: `configured`, or (0) the open-file limit
/// less what is kept free, and at least 1. A reserve connection idles for
/// 2 s at most (`Deadlines::of_reserve`).
pub(super) fn connection_cap(configured: usize) -> usize {
    if configured > 0 {
        return configured;
    }
    let soft = rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(1024, |(soft, _)| soft);
    let free = KEPT_FREE.max(soft / 16).min(soft / 4);
    usize::try_from(soft.saturating_sub(free).max(1)).unwrap_or(usize::MAX)
}

/// The site's seats, then the reserve's.
#[derive(Debug, Clone)]
pub(super) struct Seats {
    site: Counted,
    reserve: Counted,
}

impl Seats {
    /// `configured`: the site's cap (0: from the open-file limit).
    pub(super) fn new(configured: usize) -> Self {
        Self {
            site: Counted::new(connection_cap(configured)),
            reserve: Counted::new(HEALTH_CONNECTIONS),
        }
    }

    /// A seat, and whether it is the reserve's (health checks only).
    pub(super) fn take(&self) -> Option<(Seat, bool)> {
        self.site
            .take()
            .map(|seat| (seat, false))
            .or_else(|| self.reserve.take().map(|seat| (seat, true)))
    }
}

/// How many connections are open, against a cap.
#[derive(Debug, Clone)]
pub(super) struct Counted {
    cap: usize,
    open: Arc<AtomicUsize>,
}

/// One counted connection, given back on drop.
#[derive(Debug)]
pub(super) struct Seat(Arc<AtomicUsize>);

impl Drop for Seat {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Counted {
    pub(super) fn new(cap: usize) -> Self {
        Self {
            cap,
            open: Arc::default(),
        }
    }

    /// A seat, if fewer than the cap are taken.
    pub(super) fn take(&self) -> Option<Seat> {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| {
                (open < self.cap).then_some(open + 1)
            })
            .ok()
            .map(|_| Seat(Arc::clone(&self.open)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seats_up_to_the_cap_and_back_on_drop() {
        let counted = Counted::new(2);
        let a = counted.take().unwrap();
        let _b = counted.take().unwrap();
        assert!(counted.take().is_none());
        drop(a);
        assert!(counted.take().is_some());
    }

    #[test]
    fn the_cap_is_the_given_one_or_below_the_open_file_limit() {
        assert_eq!(connection_cap(7), 7);
        let soft = rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap().0;
        let cap = connection_cap(0) as u64;
        assert!(cap >= 1 && (soft < 4 || cap < soft), "{cap} of {soft}");
    }

    #[test]
    fn only_the_health_routes_are_served_from_the_reserve() {
        assert!(is_health_check("/healthz") && is_health_check("/readyz"));
        assert!(!is_health_check("/") && !is_health_check("/healthz/x"));
    }
}
