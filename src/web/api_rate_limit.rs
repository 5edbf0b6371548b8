//! The organizer API's rate limit, per organizer account (whichever of its
//! tokens a request carries): a budget of requests per minute
//! (`--api-requests-per-minute`), all of it usable at once, refilled
//! evenly; beyond it, 429 with the JSON error and a `Retry-After` that is
//! the real wait until the next request would pass. Its layer
//! ([`super::layers::per_account`]) runs after the token check, so unknown
//! tokens (401) take no room in the limiter's table. Apart from the API's
//! handlers: the app's state holds it, and they hold the state.

use std::{num::NonZeroU32, sync::Arc, time::Duration};

use governor::{
    DefaultKeyedRateLimiter, Quota, RateLimiter,
    clock::{Clock, DefaultClock},
};

use crate::{domain::OrganizerId, error::AppError};

/// How often the limiter forgets accounts whose budget is whole again.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// Requests per minute per account by default.
pub const DEFAULT_API_REQUESTS_PER_MINUTE: u32 = 600;

#[derive(Clone)]
pub struct ApiRateLimit(Option<Arc<DefaultKeyedRateLimiter<OrganizerId>>>);

impl ApiRateLimit {
    /// `per_minute` requests per account and minute; 0 turns the limit off.
    /// Inside a Tokio runtime it starts the pruning task.
    pub fn new(per_minute: u32) -> Self {
        let Some(per_minute) = NonZeroU32::new(per_minute) else {
            return Self(None);
        };
        let limiter = Arc::new(RateLimiter::keyed(Quota::per_minute(per_minute)));
        let weak = Arc::downgrade(&limiter);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let mut tick = tokio::time::interval(PRUNE_EVERY);
                tick.tick().await;
                loop {
                    tick.tick().await;
                    let Some(limiter) = weak.upgrade() else {
                        return;
                    };
                    limiter.retain_recent();
                    limiter.shrink_to_fit();
                }
            });
        }
        Self(Some(limiter))
    }

    pub fn check(&self, account: OrganizerId) -> Result<(), AppError> {
        let Some(limiter) = &self.0 else {
            return Ok(());
        };
        limiter.check_key(&account).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            AppError::TooManyRequests {
                retry_after_secs: wait.as_secs_f64().ceil().max(1.0) as u64,
            }
        })
    }
}
