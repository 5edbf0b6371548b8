//! What a buyer is told of an order's money.

use sqlx::PgPool;

use crate::{domain::OrderId, error::AppError};

/// An order's payment as its page shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PaymentState {
    /// Its tickets have a price that Stripe takes.
    pub takes_payment: bool,
    /// `pending`, `succeeded`, `failed`; `None` before the pay page.
    pub status: Option<String>,
    /// `due` or `done`.
    pub refund: Option<String>,
    pub refund_reason: Option<String>,
}

impl PaymentState {
    pub fn paid(&self) -> bool {
        self.status.as_deref() == Some("succeeded")
    }
}

/// Whether Stripe takes the order's price (for the words of its mail).
pub async fn takes_payment(db: &PgPool, order_id: OrderId) -> Result<bool, sqlx::Error> {
    let row = sqlx::query_file!("sql/payments/order_payment.sql", order_id.get())
        .fetch_optional(db)
        .await?;
    Ok(row.is_some_and(|row| row.takes_payment))
}

pub async fn of_order(db: &PgPool, order_id: OrderId) -> Result<PaymentState, AppError> {
    let row = sqlx::query_file!("sql/payments/order_payment.sql", order_id.get())
        .fetch_optional(db)
        .await?;
    Ok(row.map_or_else(PaymentState::default, |row| PaymentState {
        takes_payment: row.takes_payment,
        status: row.status,
        refund: row.refund,
        refund_reason: row.refund_reason,
    }))
}
