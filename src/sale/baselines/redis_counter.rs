//! The Redis baselines of the seeds, for comparison only
//! (`--sale-strategy redis-watch | redis-lock`): a counter per ticket type
//! in Redis is checked and decremented before the one-transaction Postgres
//! purchase ([`crate::sale::single`], the `naive` path), which has the last word.
//! A purchase that Postgres refuses (or replays) gives its reservation back.
//!
//! - `redis-watch`: `WATCH` / `GET` / `MULTI` / `DECRBY` / `EXEC`, retried
//!   when another client touched the counter in between;
//! - `redis-lock`: a `SET NX PX` lock around the `GET` and the `DECRBY`.
//!
//! The counter starts from Postgres' `remaining` the first time a ticket type
//! is bought, and knows nothing of later cancellations or capacity changes:
//! that is one of the weaknesses these baselines are kept to show.

use std::time::Duration;

use deadpool_redis::{
    Pool,
    redis::{self, AsyncCommands},
};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::{
    error::AppError,
    sale::{
        Holding,
        check::SaleCheck,
        outcome::Purchase,
        replay::replay_by_key,
        request::PurchaseRequest,
        single::{self, Locking},
    },
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reserve {
    Watch,
    Lock,
}

/// Tries before a contended counter or lock is answered 503.
const MAX_TRIES: usize = 2_000;
/// The lock's expiry: a holder that died frees it after this.
const LOCK_MS: u64 = 1_000;
/// Counters are dropped a day after their last purchase.
const COUNTER_SECS: i64 = 86_400;

pub(super) async fn purchase(
    db: &sqlx::PgPool,
    holding: &Holding,
    redis: &Pool,
    now: OffsetDateTime,
    request: &PurchaseRequest,
    how: Reserve,
) -> Result<Purchase, AppError> {
    let key = format!("stampede:baseline:stock:{}", request.ticket_type_id);
    let quantity = i64::from(request.quantity.get());
    let mut conn = redis.get().await.map_err(AppError::internal)?;
    let reserved = match how {
        Reserve::Watch => reserve_watching(db, &mut conn, &key, request).await,
        Reserve::Lock => reserve_locked(db, &mut conn, &key, request).await,
    }
    .map_err(AppError::internal)??;
    if let Err(refusal) = reserved {
        // Redis says no; a retry of a committed purchase still replays.
        return match replay_by_key(db, request).await {
            Err(AppError::NotFound) => Err(refusal),
            answer => answer,
        };
    }
    let result = single::purchase(db, holding, now, request, Locking::AtTheEnd).await;
    if !matches!(result, Ok(Purchase::Created { .. })) {
        let _: Result<i64, _> = conn.incr(&key, quantity).await;
    }
    result
}

type Reservation = Result<Result<(), AppError>, AppError>;

async fn reserve_watching(
    db: &sqlx::PgPool,
    conn: &mut deadpool_redis::Connection,
    key: &str,
    request: &PurchaseRequest,
) -> redis::RedisResult<Reservation> {
    let quantity = i64::from(request.quantity.get());
    for _ in 0..MAX_TRIES {
        redis::cmd("WATCH")
            .arg(key)
            .query_async::<()>(&mut **conn)
            .await?;
        let left: Option<i64> = conn.get(key).await?;
        let Some(left) = left else {
            redis::cmd("UNWATCH").query_async::<()>(&mut **conn).await?;
            if let Err(err) = start_counter(db, conn, key, request).await? {
                return Ok(Err(err));
            }
            continue;
        };
        if left < quantity {
            redis::cmd("UNWATCH").query_async::<()>(&mut **conn).await?;
            return Ok(Ok(Err(refusal(left))));
        }
        let done: Option<(i64, i64)> = redis::pipe()
            .atomic()
            .decr(key, quantity)
            .expire(key, COUNTER_SECS)
            .query_async(&mut **conn)
            .await?;
        if done.is_some() {
            return Ok(Ok(Ok(())));
        }
    }
    Ok(Err(AppError::Overloaded))
}

async fn reserve_locked(
    db: &sqlx::PgPool,
    conn: &mut deadpool_redis::Connection,
    key: &str,
    request: &PurchaseRequest,
) -> redis::RedisResult<Reservation> {
    let quantity = i64::from(request.quantity.get());
    let lock = format!("{key}:lock");
    let token = Uuid::new_v4().to_string();
    let mut acquired = false;
    for _ in 0..MAX_TRIES {
        let set: Option<String> = redis::cmd("SET")
            .arg(&lock)
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(LOCK_MS)
            .query_async(&mut **conn)
            .await?;
        if set.is_some() {
            acquired = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    if !acquired {
        return Ok(Err(AppError::Overloaded));
    }
    let decided = async {
        let mut left: Option<i64> = conn.get(key).await?;
        if left.is_none() {
            if let Err(err) = start_counter(db, conn, key, request).await? {
                return Ok(Err(err));
            }
            left = conn.get(key).await?;
        }
        let left = left.unwrap_or(0);
        if left < quantity {
            return Ok(Ok(Err(refusal(left))));
        }
        let _: i64 = conn.decr(key, quantity).await?;
        let _: bool = conn.expire(key, COUNTER_SECS).await?;
        Ok(Ok(Ok(())))
    }
    .await;
    // Free the lock only if it is still ours (it may have expired).
    let _: redis::RedisResult<i64> = redis::cmd("EVAL")
        .arg(
            "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
        )
        .arg(1)
        .arg(&lock)
        .arg(&token)
        .query_async(&mut **conn)
        .await;
    decided
}

/// The counter's first value: what Postgres has left now.
async fn start_counter(
    db: &sqlx::PgPool,
    conn: &mut deadpool_redis::Connection,
    key: &str,
    request: &PurchaseRequest,
) -> redis::RedisResult<Result<(), AppError>> {
    let check = match SaleCheck::load(db, request).await {
        Ok(Some(check)) => check,
        Ok(None) => return Ok(Err(AppError::NotFound)),
        Err(err) => return Ok(Err(err)),
    };
    let _: Option<String> = redis::cmd("SET")
        .arg(key)
        .arg(check.remaining)
        .arg("NX")
        .arg("EX")
        .arg(COUNTER_SECS)
        .query_async(&mut **conn)
        .await?;
    Ok(Ok(()))
}

fn refusal(left: i64) -> AppError {
    match i32::try_from(left) {
        Ok(remaining) if remaining > 0 => AppError::NotEnoughLeft { remaining },
        _ => AppError::SoldOut,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_left_says_why_a_reservation_failed() {
        assert!(matches!(
            refusal(3),
            AppError::NotEnoughLeft { remaining: 3 }
        ));
        assert!(matches!(
            refusal(1),
            AppError::NotEnoughLeft { remaining: 1 }
        ));
        for left in [0, -1, i64::MAX] {
            assert!(matches!(refusal(left), AppError::SoldOut), "{left}");
        }
    }
}
