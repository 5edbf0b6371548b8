//! Failed presale code checks, per client address (IPv6: per /64) and
//! event: a few are free, then each further one must wait twice as long as
//! the last (2 s, 4 s, ... up to an hour). A code check that unlocks nothing
//! (`GET /events/{id}?code=`) and a purchase refused for its code count
//! alike; a success resets nothing, so a guesser cannot interleave a known
//! code to start again. Checked before any read: a guesser held back costs
//! Postgres nothing. Kept in process memory: with several instances an
//! address gets this budget on each.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
};

use time::{Duration, OffsetDateTime};
use uuid::Uuid;

use super::per_client::ClientKey;
use crate::error::AppError;

/// Failed checks one address may make per event before the delays begin.
pub const DEFAULT_FREE_FAILURES: u32 = 5;
/// The longest delay between two checks.
const MAX_DELAY: Duration = Duration::hours(1);
/// An address whose last failure is this old starts afresh.
const FORGET_AFTER: Duration = Duration::hours(24);
/// Entries kept at most before the old ones are forgotten (a bound on the
/// memory a spray of addresses can take).
const PRUNE_AT: usize = 100_000;

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    last: OffsetDateTime,
    /// No check from this address for this event before then.
    not_before: OffsetDateTime,
}

/// The failed code checks of each (address, event); `free` 0 turns it off.
#[derive(Debug, Clone)]
pub struct CodeGuard {
    free: u32,
    failures: Arc<Mutex<HashMap<(ClientKey, Uuid), Failures>>>,
}

impl CodeGuard {
    pub fn new(free: u32) -> Self {
        Self {
            free,
            failures: Arc::default(),
        }
    }

    /// Whether `client` may check a code for `scope` (an event; for the
    /// API's purchases, which name no event, the ticket type) at `now`.
    pub fn check(
        &self,
        client: Option<ClientKey>,
        scope: Uuid,
        now: OffsetDateTime,
    ) -> Result<(), AppError> {
        let Some(client) = client.filter(|_| self.free > 0) else {
            return Ok(());
        };
        let failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        match failures.get(&(client, scope)) {
            Some(f) if f.not_before > now => Err(AppError::TooManyRequests {
                retry_after_secs: (f.not_before - now).whole_seconds().max(1) as u64,
            }),
            _ => Ok(()),
        }
    }

    /// A check by `client` for `scope` failed at `now`.
    pub fn failed(&self, client: Option<ClientKey>, scope: Uuid, now: OffsetDateTime) {
        let Some(client) = client.filter(|_| self.free > 0) else {
            return;
        };
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        if failures.len() >= PRUNE_AT {
            failures.retain(|_, f| now - f.last < FORGET_AFTER && f.not_before > now);
        }
        let entry = failures.entry((client, scope)).or_insert(Failures {
            count: 0,
            last: now,
            not_before: now,
        });
        if now - entry.last >= FORGET_AFTER {
            entry.count = 0;
        }
        entry.count = entry.count.saturating_add(1);
        entry.last = now;
        entry.not_before = now + delay_after(entry.count, self.free);
    }
}

/// The wait after the `count`th failure: none for the free ones, then 2 s
/// doubling each time, at most [`MAX_DELAY`].
fn delay_after(count: u32, free: u32) -> Duration {
    match count.checked_sub(free) {
        None | Some(0) => Duration::ZERO,
        Some(over) => {
            let secs = 1_i64.checked_shl(over.min(32)).unwrap_or(i64::MAX);
            Duration::seconds(secs).min(MAX_DELAY)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(ip: &str) -> Option<ClientKey> {
        Some(ClientKey::of(ip.parse().unwrap()))
    }

    #[test]
    fn delays_begin_after_the_free_failures_and_double_up_to_an_hour() {
        assert_eq!(delay_after(5, 5), Duration::ZERO);
        assert_eq!(delay_after(6, 5), Duration::seconds(2));
        assert_eq!(delay_after(7, 5), Duration::seconds(4));
        assert_eq!(delay_after(16, 5), Duration::seconds(2048));
        assert_eq!(delay_after(17, 5), MAX_DELAY);
        assert_eq!(delay_after(u32::MAX, 5), MAX_DELAY);
    }

    #[test]
    fn an_address_is_held_back_per_event_and_others_are_not() {
        let guard = CodeGuard::new(2);
        let (event, other_event) = (Uuid::new_v4(), Uuid::new_v4());
        let t0 = OffsetDateTime::UNIX_EPOCH;
        for _ in 0..3 {
            guard.check(client("192.0.2.1"), event, t0).unwrap();
            guard.failed(client("192.0.2.1"), event, t0);
        }
        assert!(matches!(
            guard.check(client("192.0.2.1"), event, t0),
            Err(AppError::TooManyRequests {
                retry_after_secs: 2
            })
        ));
        guard.check(client("192.0.2.1"), other_event, t0).unwrap();
        guard.check(client("192.0.2.2"), event, t0).unwrap();
        guard.check(None, event, t0).unwrap();
        // After the wait, one more check; failed, it waits twice as long.
        let t1 = t0 + Duration::seconds(2);
        guard.check(client("192.0.2.1"), event, t1).unwrap();
        guard.failed(client("192.0.2.1"), event, t1);
        assert!(matches!(
            guard.check(client("192.0.2.1"), event, t1),
            Err(AppError::TooManyRequests {
                retry_after_secs: 4
            })
        ));
        // A day later it starts afresh.
        let t2 = t1 + FORGET_AFTER;
        guard.check(client("192.0.2.1"), event, t2).unwrap();
        guard.failed(client("192.0.2.1"), event, t2);
        guard.check(client("192.0.2.1"), event, t2).unwrap();
    }

    #[test]
    fn zero_free_failures_turns_the_guard_off() {
        let guard = CodeGuard::new(0);
        let event = Uuid::new_v4();
        let t0 = OffsetDateTime::UNIX_EPOCH;
        for _ in 0..100 {
            guard.failed(client("192.0.2.1"), event, t0);
        }
        guard.check(client("192.0.2.1"), event, t0).unwrap();
    }
}
