//! Rate limits on purchases, the scalper defence at the site layer: a
//! script buys faster than a person. Per client address (IPv6: per /64)
//! and per buyer email, each a burst then one per period; beyond, 429 with
//! a `Retry-After` that is the real wait. Configurable; a loopback
//! benchmark, where every buyer is 127.0.0.1, turns the per-address one off
//! with an explicit flag (`--purchase-burst-per-ip 0`).

use std::{num::NonZeroU32, sync::Arc, time::Duration};

use governor::{
    DefaultKeyedRateLimiter, Quota, RateLimiter,
    clock::{Clock, DefaultClock},
};

use super::per_client::ClientKey;
use crate::{domain::Email, error::AppError};

/// How often the limiters forget keys that are back to a full burst.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy)]
pub struct PurchaseRates {
    /// Purchases one client address may make at once before it is slowed
    /// to one per `period`; 0 turns the limit off.
    pub per_ip_burst: u32,
    /// The same per buyer email; 0 turns it off.
    pub per_email_burst: u32,
    pub period: Duration,
}

impl Default for PurchaseRates {
    fn default() -> Self {
        Self {
            per_ip_burst: 30,
            per_email_burst: 5,
            period: Duration::from_secs(2),
        }
    }
}

#[derive(Clone)]
pub struct PurchaseLimits {
    per_ip: Option<Arc<DefaultKeyedRateLimiter<ClientKey>>>,
    per_email: Option<Arc<DefaultKeyedRateLimiter<String>>>,
}

impl PurchaseLimits {
    /// Must be called inside a Tokio runtime: it starts the pruning task.
    pub fn new(rates: PurchaseRates) -> Self {
        let quota = |burst: u32| {
            let burst = NonZeroU32::new(burst)?;
            Some(Quota::with_period(rates.period)?.allow_burst(burst))
        };
        let limits = Self {
            per_ip: quota(rates.per_ip_burst).map(|q| Arc::new(RateLimiter::keyed(q))),
            per_email: quota(rates.per_email_burst).map(|q| Arc::new(RateLimiter::keyed(q))),
        };
        let weak = (
            limits.per_ip.as_ref().map(Arc::downgrade),
            limits.per_email.as_ref().map(Arc::downgrade),
        );
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(PRUNE_EVERY);
            loop {
                tick.tick().await;
                let (ip, email) = (
                    weak.0.as_ref().and_then(std::sync::Weak::upgrade),
                    weak.1.as_ref().and_then(std::sync::Weak::upgrade),
                );
                if ip.is_none() && email.is_none() {
                    return;
                }
                if let Some(limiter) = ip {
                    limiter.retain_recent();
                    limiter.shrink_to_fit();
                }
                if let Some(limiter) = email {
                    limiter.retain_recent();
                    limiter.shrink_to_fit();
                }
            }
        });
        limits
    }

    /// Whether purchases are limited per client address at all.
    pub fn limits_per_ip(&self) -> bool {
        self.per_ip.is_some()
    }

    /// The client address's budget, if purchases are limited per address.
    pub fn check_client(&self, client: &ClientKey) -> Result<(), AppError> {
        match &self.per_ip {
            Some(limiter) => check(limiter, client),
            None => Ok(()),
        }
    }

    /// The buyer's own budget; the email as typed, lower-cased.
    pub fn check_email(&self, email: &Email) -> Result<(), AppError> {
        match &self.per_email {
            Some(limiter) => check(limiter, &email.as_str().to_owned()),
            None => Ok(()),
        }
    }
}

fn check<K: std::hash::Hash + Eq + Clone>(
    limiter: &DefaultKeyedRateLimiter<K>,
    key: &K,
) -> Result<(), AppError> {
    limiter.check_key(key).map_err(|not_until| {
        let wait = not_until.wait_time_from(DefaultClock::default().now());
        AppError::TooManyRequests {
            retry_after_secs: wait.as_secs_f64().ceil().max(1.0) as u64,
        }
    })
}
