//! The reconciler: a webhook that never comes must not lose a paid order.
//! It asks Stripe about the payments of held orders whose word may be lost
//! (a while after the pay page made the intent, then every 30 s in the
//! hold's last two minutes; see `sql/payments/claim_unsettled.sql`) and
//! settles what succeeded, exactly as the webhook would have
//! ([`super::settle`]). Once an order has ended unpaid, and a grace of the
//! same while has passed (a payment under way, 3-D Secure, may still land),
//! it cancels the intent at Stripe ([`close_round`]), so that a pay page
//! left open cannot take money later; one that succeeded meanwhile is
//! settled instead (a late payment: the stock again, or a refund).

use std::time::Duration;

use sqlx::PgPool;
use time::OffsetDateTime;

use super::{
    Payments,
    settle::{Settled, Succeeded, settle},
    stripe::IntentStatus,
};
use crate::error::AppError;

/// Payments one round asks about at most (the pacing spreads the calls).
const ROUND: i64 = 50;

/// One round at `now`: how many payments it settled.
#[tracing::instrument(skip_all)]
pub async fn round(
    db: &PgPool,
    payments: &Payments,
    now: OffsetDateTime,
) -> Result<usize, AppError> {
    let first_look = payments.first_look;
    let mut tx = db.begin().await?;
    let due = sqlx::query_file_scalar!(
        "sql/payments/claim_unsettled.sql",
        now,
        ROUND,
        sqlx::postgres::types::PgInterval::try_from(first_look)
            .map_err(|err| AppError::Internal(anyhow::anyhow!(err)))?,
    )
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    let mut settled = 0;
    for intent_id in due {
        let intent = match payments.stripe.retrieve_payment_intent(&intent_id).await {
            Ok(intent) => intent,
            Err(err) => {
                tracing::warn!(%intent_id, %err, "could not ask Stripe about a payment");
                continue;
            }
        };
        if intent.status != IntentStatus::Succeeded {
            continue;
        }
        let paid = Succeeded {
            intent_id: &intent.id,
            amount_minor: intent.amount,
            currency: &intent.currency,
        };
        let outcome = settle(db, &paid, OffsetDateTime::now_utc()).await?;
        if outcome != Settled::AlreadySettled {
            tracing::info!(%intent_id, ?outcome, "the reconciler settled a payment whose webhook had not come");
            settled += 1;
        }
    }
    Ok(settled)
}

/// One round at `now`: cancel at Stripe the intents of orders that ended
/// unpaid. Returns how many it closed or settled.
#[tracing::instrument(skip_all)]
pub async fn close_round(
    db: &PgPool,
    payments: &Payments,
    now: OffsetDateTime,
) -> Result<usize, AppError> {
    let grace = sqlx::postgres::types::PgInterval::try_from(payments.first_look)
        .map_err(|err| AppError::Internal(anyhow::anyhow!(err)))?;
    let mut tx = db.begin().await?;
    let due = sqlx::query_file_scalar!("sql/payments/claim_unclosed.sql", now, ROUND, grace)
        .fetch_all(&mut *tx)
        .await?;
    let mut done = 0;
    tx.commit().await?;
    for intent_id in due {
        let intent = match payments.stripe.cancel_payment_intent(&intent_id).await {
            Ok(intent) => intent,
            Err(err) => {
                tracing::warn!(%intent_id, %err, "could not cancel an unpaid intent; trying again later");
                continue;
            }
        };
        match intent.status {
            IntentStatus::Succeeded => {
                let paid = Succeeded {
                    intent_id: &intent.id,
                    amount_minor: intent.amount,
                    currency: &intent.currency,
                };
                settle(db, &paid, OffsetDateTime::now_utc()).await?;
                done += 1;
            }
            IntentStatus::Canceled => {
                let mut tx = db.begin().await?;
                sqlx::query_file!(
                    "sql/payments/intent_closed.sql",
                    intent_id,
                    OffsetDateTime::now_utc()
                )
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                done += 1;
            }
            // Processing: Stripe decides; looked at again in 30 s.
            _ => {}
        }
    }
    Ok(done)
}

/// How long after the pay page the first look comes: four rounds.
pub fn first_look(every: Duration) -> Duration {
    every.saturating_mul(4)
}
