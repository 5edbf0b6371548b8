//! The baseline strategies, kept for benchmarks and comparison only
//! (`--sale-strategy naive | for-update | redis-watch | redis-lock`): the
//! sale path's reader meets only the engine ([`super::batch`]); these are
//! what it is measured against.
//!
//! - [`postgres`]: `naive` and `for-update`, one transaction per purchase
//!   ([`super::single`], the path the engine's failed batches fall back to),
//!   with the ticket type's row locked last or first;
//! - [`redis_counter`]: `redis-watch` and `redis-lock`, a Redis counter per
//!   ticket type checked and decremented before `naive`.

mod postgres;
mod redis_counter;

use std::fmt;

use time::OffsetDateTime;

use super::{outcome::Purchase, request::PurchaseRequest, strategy::Strategy};
use crate::{error::AppError, sale::Holding};

/// A strategy kept for comparison: every one but the engine's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Baseline {
    Naive,
    ForUpdate,
    RedisWatch,
    RedisLock,
}

impl Baseline {
    /// The baseline `strategy` names; `None` for the engine (`batch`).
    pub(super) fn of(strategy: Strategy) -> Option<Self> {
        match strategy {
            Strategy::Batch => None,
            Strategy::Naive => Some(Self::Naive),
            Strategy::ForUpdate => Some(Self::ForUpdate),
            Strategy::RedisWatch => Some(Self::RedisWatch),
            Strategy::RedisLock => Some(Self::RedisLock),
        }
    }

    fn strategy(self) -> Strategy {
        match self {
            Self::Naive => Strategy::Naive,
            Self::ForUpdate => Strategy::ForUpdate,
            Self::RedisWatch => Strategy::RedisWatch,
            Self::RedisLock => Strategy::RedisLock,
        }
    }

    /// One purchase this baseline's way, Postgres having the last word;
    /// `redis`: the counters' server, which the `redis-*` ones need.
    pub(super) async fn purchase(
        self,
        db: &sqlx::PgPool,
        holding: &Holding,
        redis: Option<&deadpool_redis::Pool>,
        now: OffsetDateTime,
        request: &PurchaseRequest,
    ) -> Result<Purchase, AppError> {
        match self {
            Self::Naive => postgres::naive(db, holding, now, request).await,
            Self::ForUpdate => postgres::for_update(db, holding, now, request).await,
            Self::RedisWatch | Self::RedisLock => {
                let redis = redis.ok_or_else(|| {
                    AppError::internal(anyhow::anyhow!("{self} needs a Redis URL"))
                })?;
                let how = if self == Self::RedisWatch {
                    redis_counter::Reserve::Watch
                } else {
                    redis_counter::Reserve::Lock
                };
                redis_counter::purchase(db, holding, redis, now, request, how).await
            }
        }
    }
}

/// As its strategy is named (`naive`, `redis-watch`, ...).
impl fmt::Display for Baseline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.strategy().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_strategy_but_the_engine_is_a_baseline_of_its_own_name() {
        assert_eq!(Baseline::of(Strategy::Batch), None);
        for strategy in Strategy::ALL.into_iter().skip(1) {
            let baseline = Baseline::of(strategy).unwrap();
            assert_eq!(baseline.strategy(), strategy);
            assert_eq!(baseline.to_string(), strategy.as_str());
        }
    }
}
