//! What each client address holds at once (open connections, requests in
//! flight), so that one address cannot take what everyone shares.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{Arc, Mutex, PoisonError},
};

pub use crate::domain::ClientKey;

/// The log-in limiter's key (`tower_governor`): the peer address from
/// `ConnectInfo`, as a [`ClientKey`].
#[derive(Debug, Clone, Copy)]
pub struct ClientKeyExtractor;

impl tower_governor::key_extractor::KeyExtractor for ClientKeyExtractor {
    type Key = ClientKey;

    fn extract<T>(
        &self,
        req: &http::Request<T>,
    ) -> Result<Self::Key, tower_governor::GovernorError> {
        req.extensions()
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|axum::extract::ConnectInfo(addr)| ClientKey::of(addr.ip()))
            .ok_or(tower_governor::GovernorError::UnableToExtractKey)
    }
}

/// At most `cap` slots per client at once; `cap` 0 means no cap (behind a
/// proxy every connection comes from the proxy's address).
#[derive(Debug, Clone)]
pub struct PerClient {
    cap: usize,
    held: Arc<Mutex<HashMap<ClientKey, usize>>>,
}

impl PerClient {
    pub fn new(cap: usize) -> Self {
        Self {
            cap,
            held: Arc::default(),
        }
    }

    /// A slot for `ip`, released on drop; `None` when it holds `cap` already.
    pub fn try_acquire(&self, ip: IpAddr) -> Option<ClientSlot> {
        if self.cap == 0 {
            return Some(ClientSlot(None));
        }
        let key = ClientKey::of(ip);
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let count = held.entry(key).or_insert(0);
        if *count >= self.cap {
            return None;
        }
        *count += 1;
        Some(ClientSlot(Some((key, Arc::clone(&self.held)))))
    }

    /// Slots `ip` holds now.
    pub fn held_by(&self, ip: IpAddr) -> usize {
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.get(&ClientKey::of(ip)).copied().unwrap_or(0)
    }
}

type Held = Arc<Mutex<HashMap<ClientKey, usize>>>;

/// One slot of a [`PerClient`] cap; the map forgets a client whose last
/// slot is released, so it only ever holds clients that hold something.
#[derive(Debug)]
pub struct ClientSlot(Option<(ClientKey, Held)>);

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let Some((key, held)) = self.0.take() else {
            return;
        };
        let mut held = held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = held.get_mut(&key) {
            *count -= 1;
            if *count == 0 {
                held.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_client_gets_at_most_cap_slots_and_gets_them_back_on_release() {
        let caps = PerClient::new(2);
        let a = caps.try_acquire(ip("192.0.2.1")).unwrap();
        let _b = caps.try_acquire(ip("192.0.2.1")).unwrap();
        assert!(caps.try_acquire(ip("192.0.2.1")).is_none());
        assert!(
            caps.try_acquire(ip("192.0.2.2")).is_some(),
            "others are not affected"
        );
        drop(a);
        assert_eq!(caps.held_by(ip("192.0.2.1")), 1);
        assert!(caps.try_acquire(ip("192.0.2.1")).is_some());
    }

    #[test]
    fn ipv6_addresses_count_per_slash_64_and_mapped_ipv4_as_ipv4() {
        let caps = PerClient::new(1);
        let _held = caps.try_acquire(ip("2001:db8:1:2::1")).unwrap();
        assert!(caps.try_acquire(ip("2001:db8:1:2:ffff::9")).is_none());
        assert!(caps.try_acquire(ip("2001:db8:1:3::1")).is_some());
        let _v4 = caps.try_acquire(ip("192.0.2.7")).unwrap();
        assert!(caps.try_acquire(ip("::ffff:192.0.2.7")).is_none());
    }

    #[test]
    fn released_clients_leave_the_table_and_cap_zero_counts_nothing() {
        let caps = PerClient::new(3);
        drop(caps.try_acquire(ip("192.0.2.1")).unwrap());
        assert!(caps.held.lock().unwrap().is_empty());
        let unlimited = PerClient::new(0);
        let slots: Vec<_> = (0..100)
            .map(|_| unlimited.try_acquire(ip("192.0.2.1")).unwrap())
            .collect();
        assert_eq!(slots.len(), 100);
        assert!(unlimited.held.lock().unwrap().is_empty());
    }
}
