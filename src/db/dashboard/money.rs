//! The money of an event's Stripe payments, per currency: what is paid
//! and kept, waiting to be paid, refunded (or being refunded), and failed
//! (the order ended before a payment came).

use crate::{
    domain::{EventId, OrganizerId},
    error::AppError,
};

/// One currency's payments, in minor units.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct PaymentTotals {
    pub currency: String,
    /// Captured and kept: the confirmed paid orders' totals.
    pub paid_minor: i64,
    /// Orders held for payment whose pay page was opened.
    pub pending_minor: i64,
    /// Given back in full.
    pub refunded_minor: i64,
    /// Captured, to be given back (the refunder retries until Stripe agrees).
    pub refunding_minor: i64,
    /// Orders that ended before their payment came.
    pub failed_minor: i64,
}

pub(super) async fn payment_totals(
    tx: &mut sqlx::PgConnection,
    organizer_id: OrganizerId,
    event_id: EventId,
) -> Result<Vec<PaymentTotals>, AppError> {
    Ok(sqlx::query_as!(
        PaymentTotals,
        r#"SELECT p.currency,
                  COALESCE(SUM(p.amount_minor) FILTER (WHERE p.status = 'succeeded' AND p.refund IS NULL), 0)::int8 AS "paid_minor!",
                  COALESCE(SUM(p.amount_minor) FILTER (WHERE p.status = 'pending'), 0)::int8 AS "pending_minor!",
                  COALESCE(SUM(p.amount_minor) FILTER (WHERE p.refund = 'done'), 0)::int8 AS "refunded_minor!",
                  COALESCE(SUM(p.amount_minor) FILTER (WHERE p.refund = 'due'), 0)::int8 AS "refunding_minor!",
                  COALESCE(SUM(p.amount_minor) FILTER (WHERE p.status = 'failed'), 0)::int8 AS "failed_minor!"
           FROM payments p
           JOIN orders o ON o.id = p.order_id
           JOIN ticket_types t ON t.id = o.ticket_type_id
           JOIN events e ON e.id = t.event_id
           WHERE t.event_id = $1 AND e.organizer_id = $2
           GROUP BY p.currency ORDER BY p.currency"#,
        event_id.get(),
        organizer_id.get(),
    )
    .fetch_all(tx)
    .await?)
}
