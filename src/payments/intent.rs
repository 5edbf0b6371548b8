//! The pay page's payment: one PaymentIntent per order, made when the
//! buyer opens the page (never in the sale's batch), and the same one on
//! every later visit, double click or retry. The payment's row is the
//! record: a short lease lets one request make the intent, the others wait
//! for it; every call that makes one carries the order's Idempotency-Key,
//! so Stripe itself answers a retry with the same intent.

use std::time::Duration;

use sqlx::PgPool;
use time::OffsetDateTime;

use super::Payments;
use crate::{domain::OrderId, error::AppError};

/// What the pay page needs of Stripe's intent.
#[derive(Debug, Clone)]
pub struct OpenPayment {
    pub intent_id: String,
    pub client_secret: String,
}

/// How long a request waits for another one's intent before answering 503.
const WAIT_FOR_OTHER: Duration = Duration::from_secs(10);

/// The order's intent, made if it has none. `description` names the
/// purchase on the buyer's statement and in Stripe's dashboard.
#[tracing::instrument(skip(db, payments, description))]
pub async fn open(
    db: &PgPool,
    payments: &Payments,
    order_id: OrderId,
    description: &str,
    now: OffsetDateTime,
) -> Result<OpenPayment, AppError> {
    let mut tx = db.begin().await?;
    sqlx::query_file!("sql/payments/open_payment.sql", order_id.get())
        .execute(&mut *tx)
        .await?;
    let lease = sqlx::query_file!("sql/payments/lease_payment.sql", order_id.get(), now)
        .fetch_optional(&mut *tx)
        .await?;
    tx.commit().await?;
    if let Some(lease) = lease {
        let made = payments
            .stripe
            .create_payment_intent(
                order_id.get(),
                lease.amount_minor,
                &lease.currency,
                description,
            )
            .await;
        let intent = match made {
            Ok(intent) => intent,
            Err(err) => {
                // The next visit tries again at once (with the same key).
                tracing::warn!(%err, "Stripe did not make the payment");
                let mut tx = db.begin().await?;
                sqlx::query_file!("sql/payments/release_lease.sql", order_id.get())
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                return Err(AppError::PaymentUnavailable);
            }
        };
        let Some(client_secret) = intent.client_secret.clone() else {
            let mut tx = db.begin().await?;
            sqlx::query_file!("sql/payments/release_lease.sql", order_id.get())
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            return Err(AppError::PaymentUnavailable);
        };
        let mut tx = db.begin().await?;
        sqlx::query_file!(
            "sql/payments/record_intent.sql",
            order_id.get(),
            intent.id,
            client_secret,
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
    }
    // Ours, or another request's: wait for it a little.
    let started = tokio::time::Instant::now();
    loop {
        let row = sqlx::query_file!("sql/payments/read_intent.sql", order_id.get())
            .fetch_optional(db)
            .await?;
        // No payment at all: the order is not held (any more).
        let Some(row) = row else {
            return Err(AppError::NotHeld);
        };
        if let (Some(intent_id), Some(client_secret)) = (row.intent_id, row.client_secret) {
            return Ok(OpenPayment {
                intent_id,
                client_secret,
            });
        }
        if started.elapsed() > WAIT_FOR_OTHER {
            return Err(AppError::PaymentUnavailable);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
