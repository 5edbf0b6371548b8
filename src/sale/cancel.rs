//! Cancelling: one order (its tickets go back on sale and the buyer's limit
//! is freed), or a whole event.

use sqlx::PgPool;

use super::{Order, find_by_id};
use crate::{
    db,
    domain::{EventId, OrderId, OrganizerId},
    error::AppError,
};

/// Cancel a confirmed order and return its tickets to sale, in one
/// transaction. The status check in the UPDATE makes a second cancel (even a
/// concurrent one) a no-op that reports [`AppError::AlreadyCancelled`].
#[tracing::instrument(skip(db))]
pub async fn cancel(db: &PgPool, order_id: OrderId) -> Result<Order, AppError> {
    let mut tx = db.begin().await?;
    let order = sqlx::query!(
        "UPDATE orders SET status = 'cancelled', cancelled_at = now()
         WHERE id = $1 AND status = 'confirmed'
         RETURNING ticket_type_id, email, quantity",
        order_id.get(),
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(order) = order else {
        tx.rollback().await?;
        return match find_by_id(db, order_id).await? {
            Some(_) => Err(AppError::AlreadyCancelled),
            None => Err(AppError::NotFound),
        };
    };
    sqlx::query!(
        "UPDATE buyer_holdings SET quantity = quantity - $3 WHERE ticket_type_id = $1 AND email = $2",
        order.ticket_type_id,
        order.email,
        order.quantity,
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(
        "UPDATE ticket_types SET remaining = remaining + $2 WHERE id = $1",
        order.ticket_type_id,
        order.quantity,
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    find_by_id(db, order_id).await?.ok_or(AppError::NotFound)
}

/// Cancel an event: stop its sales, then cancel every live order and return
/// the tickets. Two transactions, each taking its locks in the order that
/// purchases and order cancellations do (orders, then buyer holdings, then
/// the ticket type), so neither can deadlock with them:
/// 1. mark the event cancelled and set `sales_halted` on its ticket types.
///    Taking those row locks waits for purchases holding them to commit;
///    purchases that come later re-check `sales_halted` and refuse;
/// 2. cancel the live orders, zero the buyers' holdings and restore
///    `remaining`. No purchase can succeed any more, so this is final; it
///    is safe to repeat, and calling this again finishes an interrupted run.
#[tracing::instrument(skip(db))]
pub async fn cancel_event(
    db: &PgPool,
    organizer_id: OrganizerId,
    event_id: EventId,
) -> Result<u64, AppError> {
    db::events::find_owned(db, organizer_id, event_id).await?;

    let mut tx = db.begin().await?;
    sqlx::query!(
        "UPDATE events SET status = 'cancelled', updated_at = now()
         WHERE id = $1 AND organizer_id = $2 AND status <> 'cancelled'",
        event_id.get(),
        organizer_id.get(),
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(
        "UPDATE ticket_types SET sales_halted = true WHERE event_id = $1 AND NOT sales_halted",
        event_id.get()
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;

    let mut tx = db.begin().await?;
    let cancelled = sqlx::query!(
        "UPDATE orders o SET status = 'cancelled', cancelled_at = now()
         FROM ticket_types t
         WHERE t.id = o.ticket_type_id AND t.event_id = $1 AND o.status = 'confirmed'",
        event_id.get(),
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    sqlx::query!(
        "UPDATE buyer_holdings h SET quantity = 0 FROM ticket_types t
         WHERE t.id = h.ticket_type_id AND t.event_id = $1 AND h.quantity <> 0",
        event_id.get(),
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(
        "UPDATE ticket_types SET remaining = capacity WHERE event_id = $1",
        event_id.get()
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    tracing::info!(%event_id, cancelled, "event cancelled");
    Ok(cancelled)
}
