//! The reconciler: a webhook that never comes must not lose a paid order.
//! It asks Stripe about payments whose word may be lost (a while after the
//! pay page made the intent, again near and after the hold's end; see
//! `sql/payments/claim_unsettled.sql`) and settles what succeeded, exactly
//! as the webhook would have ([`super::settle`]).

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
    let due = sqlx::query_file_scalar!(
        "sql/payments/claim_unsettled.sql",
        now,
        ROUND,
        sqlx::postgres::types::PgInterval::try_from(first_look)
            .map_err(|err| AppError::Internal(anyhow::anyhow!(err)))?,
    )
    .fetch_all(db)
    .await?;
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

/// How long after the pay page the first look comes: four rounds.
pub(super) fn first_look(every: Duration) -> Duration {
    every.saturating_mul(4)
}
