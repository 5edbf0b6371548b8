//! Settling a payment that Stripe says succeeded, exactly once, whichever
//! word comes first (the signed webhook, the reconciler, the buyer's return
//! to the pay page) and however often: in one transaction, under the
//! order's row lock and then the payment's (the order of the trigger of
//! migrations/0024_payments.sql), the payment is marked succeeded once and
//! - a held order is confirmed, with its tickets;
//! - an order whose hold expired meanwhile takes its stock again with the
//!   sale's conditional `UPDATE`, within the buyer's limits, and is
//!   confirmed; where the stock or a limit refuses, the money is refunded;
//! - an order cancelled otherwise is refunded.
//!
//! Money is never kept without a ticket, and no ticket is sold twice.

use sqlx::PgPool;
use time::OffsetDateTime;

use crate::{db, domain::OrderStatus, error::AppError};

/// What a settlement did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// The order is confirmed by this payment (`late`: after its hold had
    /// expired, the stock taken again).
    Confirmed { late: bool },
    /// The order had ended (or its stock was gone): a refund is due.
    RefundDue,
    /// Settled before (a duplicate or a later word): nothing changed.
    AlreadySettled,
    /// No payment of ours has this intent (another account's, or a test's).
    Unknown,
}

/// What Stripe said of the payment: its intent, amount and currency.
#[derive(Debug, Clone)]
pub struct Succeeded<'a> {
    pub intent_id: &'a str,
    pub amount_minor: i64,
    pub currency: &'a str,
}

#[tracing::instrument(skip(db), fields(intent = %paid.intent_id))]
pub async fn settle(
    db: &PgPool,
    paid: &Succeeded<'_>,
    now: OffsetDateTime,
) -> Result<Settled, AppError> {
    let mut retries = 0;
    loop {
        match settle_once(db, paid, now).await {
            Err(err) if db::retry_deadlock(&err, &mut retries) => continue,
            other => return other,
        }
    }
}

async fn settle_once(
    db: &PgPool,
    paid: &Succeeded<'_>,
    now: OffsetDateTime,
) -> Result<Settled, AppError> {
    let mut tx = db.begin().await?;
    let Some(order) = sqlx::query_file!("sql/payments/lock_order.sql", paid.intent_id)
        .fetch_optional(&mut *tx)
        .await?
    else {
        tx.rollback().await?;
        return Ok(Settled::Unknown);
    };
    let Some(payment) = sqlx::query_file!("sql/payments/mark_succeeded.sql", order.id, now)
        .fetch_optional(&mut *tx)
        .await?
    else {
        tx.rollback().await?;
        return Ok(Settled::AlreadySettled);
    };
    // Stripe's word must be for this order's money; anything else is kept
    // for no ticket: refunded.
    let matches = payment.amount_minor == paid.amount_minor
        && payment.currency.eq_ignore_ascii_case(paid.currency);
    if !matches {
        tracing::error!(
            order_id = %order.id,
            expected = payment.amount_minor,
            got = paid.amount_minor,
            "a payment's amount or currency differs from its order's: refunding it"
        );
    }
    let outcome = match order.status {
        OrderStatus::Held if matches => confirm(&mut tx, order.id, now, false, paid).await?,
        OrderStatus::Cancelled
            if matches
                && order.cancel_reason.as_deref() == Some("expired")
                && order.presale_code_id.is_none() =>
        {
            // A late payment: the stock again, within the buyer's limits,
            // or (in a savepoint, undone) a refund.
            let mut retake = sqlx::Connection::begin(&mut *tx).await?;
            let stock = sqlx::query_file_scalar!(
                "sql/payments/retake_stock.sql",
                order.ticket_type_id,
                order.quantity,
            )
            .fetch_optional(&mut *retake)
            .await?;
            // The buyer's limits with the sale's own statements.
            let held = stock.is_some()
                && sqlx::query_file_scalar!(
                    "sql/sale/hold_ticket_type.sql",
                    order.ticket_type_id,
                    order.buyer_key,
                    order.quantity,
                )
                .fetch_optional(&mut *retake)
                .await?
                .is_some()
                && sqlx::query_file_scalar!(
                    "sql/sale/hold_event.sql",
                    order.ticket_type_id,
                    order.buyer_key,
                    order.quantity,
                )
                .fetch_optional(&mut *retake)
                .await?
                .is_some();
            if held {
                retake.commit().await?;
                confirm(&mut tx, order.id, now, true, paid).await?
            } else {
                retake.rollback().await?;
                refund_due(&mut tx, order.id, "late_sold_out", now).await?
            }
        }
        OrderStatus::Confirmed if matches && order.confirmed_at.is_some() => {
            // Confirmed before its payment: cannot happen (a priced order is
            // confirmed by its payment only); keep the money with its ticket.
            Settled::Confirmed { late: false }
        }
        _ => {
            let reason = match order.cancel_reason.as_deref() {
                Some("expired") => "late_sold_out",
                _ => "cancelled",
            };
            refund_due(&mut tx, order.id, reason, now).await?
        }
    };
    tx.commit().await?;
    tracing::info!(order_id = %order.id, ?outcome, "payment settled");
    Ok(outcome)
}

async fn confirm(
    tx: &mut sqlx::PgConnection,
    order_id: uuid::Uuid,
    now: OffsetDateTime,
    late: bool,
    paid: &Succeeded<'_>,
) -> Result<Settled, AppError> {
    let confirmed = sqlx::query_file_scalar!(
        "sql/payments/confirm_paid.sql",
        order_id,
        now,
        late,
        paid.intent_id,
    )
    .fetch_optional(&mut *tx)
    .await?;
    match confirmed {
        Some(_) => Ok(Settled::Confirmed { late }),
        // The row lock is held: the status read above still stands.
        None => Err(AppError::Internal(anyhow::anyhow!(
            "order {order_id} could not be confirmed by its payment"
        ))),
    }
}

async fn refund_due(
    tx: &mut sqlx::PgConnection,
    order_id: uuid::Uuid,
    reason: &str,
    now: OffsetDateTime,
) -> Result<Settled, AppError> {
    sqlx::query_file!("sql/payments/refund_due.sql", order_id, reason, now)
        .execute(&mut *tx)
        .await?;
    Ok(Settled::RefundDue)
}
