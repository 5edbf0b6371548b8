//! The refunder: refunds written as due (by the trigger that ends an order
//! with a captured payment, or by a settlement too late for its stock) are
//! made at Stripe, each at most once: one refunder claims a refund for ten
//! minutes (far past three paced calls) with no transaction open, calls Stripe with the order's
//! Idempotency-Key (and [`super::stripe::Stripe::refund`] first looks for a
//! refund made before a crash), then records it with its `order.refunded`
//! outbox row. A failure is retried with a growing, jittered back-off.

use std::time::Duration;

use rand::Rng;
use sqlx::PgPool;
use time::OffsetDateTime;

use super::Payments;
use crate::error::AppError;

/// Refunds one round claims at most: each takes up to three paced calls,
/// well within the claim's lease (`sql/payments/claim_refunds.sql`).
pub(super) const ROUND: i64 = 10;

/// One round: the refunds due at `now`. Returns how many it claimed (a
/// full round is followed by another at once).
#[tracing::instrument(skip_all)]
pub async fn round(db: &PgPool, payments: &Payments) -> Result<usize, AppError> {
    let mut tx = db.begin().await?;
    let due = sqlx::query_file!(
        "sql/payments/claim_refunds.sql",
        OffsetDateTime::now_utc(),
        ROUND
    )
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    let claimed = due.len();
    for refund in due {
        match payments
            .stripe
            .refund(&refund.intent_id, refund.order_id)
            .await
        {
            // Stripe may take a while to settle a refund: until it says
            // `succeeded`, the refund stays due and is looked at again (the
            // look-up finds the same refund; none is made twice).
            Ok(done) if done.status == "succeeded" => {
                let mut tx = db.begin().await?;
                sqlx::query_file!(
                    "sql/payments/refund_done.sql",
                    refund.order_id,
                    done.id,
                    OffsetDateTime::now_utc(),
                )
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
            }
            not_yet => {
                let why = match not_yet {
                    Ok(pending) => format!("refund {} is {}", pending.id, pending.status),
                    Err(err) => err.to_string(),
                };
                let wait = back_off(refund.refund_attempts);
                tracing::warn!(order_id = %refund.order_id, %why, ?wait, "a refund is not done; looking again later");
                let mut tx = db.begin().await?;
                sqlx::query_file!(
                    "sql/payments/refund_failed.sql",
                    refund.order_id,
                    why,
                    OffsetDateTime::now_utc() + wait,
                )
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
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
