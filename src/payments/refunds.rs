//! The refunder: refunds written as due (by the trigger that ends an order
//! with a captured payment, or by a settlement too late for its stock) are
//! made at Stripe, each at most once: one refunder claims a refund for a
//! minute with no transaction open, calls Stripe with the order's
//! Idempotency-Key (and [`super::stripe::Stripe::refund`] first looks for a
//! refund made before a crash), then records it with its `order.refunded`
//! outbox row. A failure is retried with a growing, jittered back-off.

use std::time::Duration;

use rand::Rng;
use sqlx::PgPool;
use time::OffsetDateTime;

use super::Payments;
use crate::error::AppError;

/// Refunds one round claims at most.
pub(super) const ROUND: i64 = 20;

/// One round: the refunds due at `now`. Returns how many it claimed (a
/// full round is followed by another at once).
#[tracing::instrument(skip_all)]
pub async fn round(
    db: &PgPool,
    payments: &Payments,
    now: OffsetDateTime,
) -> Result<usize, AppError> {
    let due = sqlx::query_file!("sql/payments/claim_refunds.sql", now, ROUND)
        .fetch_all(db)
        .await?;
    let claimed = due.len();
    for refund in due {
        match payments
            .stripe
            .refund(&refund.intent_id, refund.order_id)
            .await
        {
            Ok(done) => {
                sqlx::query_file!(
                    "sql/payments/refund_done.sql",
                    refund.order_id,
                    done.id,
                    OffsetDateTime::now_utc(),
                )
                .execute(db)
                .await?;
            }
            Err(err) => {
                let wait = back_off(refund.refund_attempts);
                tracing::warn!(order_id = %refund.order_id, %err, ?wait, "a refund failed; retrying later");
                sqlx::query_file!(
                    "sql/payments/refund_failed.sql",
                    refund.order_id,
                    err.to_string(),
                    now + wait,
                )
                .execute(db)
                .await?;
            }
        }
    }
    Ok(claimed)
}

/// 5 s, doubling to an hour at most, each with up to half again at random.
fn back_off(attempts: i32) -> Duration {
    let base = 5_u64.saturating_mul(1 << attempts.clamp(0, 10)).min(3600);
    let jitter = rand::rng().random_range(0..=base / 2);
    Duration::from_secs(base + jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_back_off_grows_to_an_hour_with_jitter() {
        for (attempts, low) in [(0, 5), (1, 10), (3, 40), (20, 3600)] {
            let wait = back_off(attempts).as_secs();
            assert!((low..=low + low / 2).contains(&wait), "{attempts}: {wait}");
        }
    }
}
