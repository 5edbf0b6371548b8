//! Cancelling: one order by its buyer, who holds the order's cancel secret
//! (its tickets go back on sale and the buyer's limit is freed), or a whole
//! event by its organizer.

use sqlx::PgPool;
use time::OffsetDateTime;

use super::order::{Order, find_by_id};
use crate::{
    db,
    domain::{CancelSecret, EventId, OrderId, OrderStatus, OrganizerId},
    error::AppError,
};

/// Cancel a live (held or confirmed) order and return its tickets to sale, in one
/// transaction. Only the holder of the order's cancel secret may: the UPDATE
/// matches the secret's hash, so the order id alone cancels nothing
/// ([`AppError::Forbidden`]). The status check in the UPDATE makes a second
/// cancel (even a concurrent one) a no-op that reports
/// [`AppError::AlreadyCancelled`]. Once the event has started (at `now`),
/// its orders stay as they are ([`AppError::EventStarted`]): seats of a past
/// show go back on sale to no one.
#[tracing::instrument(skip(db, secret))]
pub async fn cancel(
    db: &PgPool,
    now: OffsetDateTime,
    order_id: OrderId,
    secret: Option<&CancelSecret>,
) -> Result<Order, AppError> {
    let mut retries = 0;
    loop {
        match cancel_once(db, now, order_id, secret).await {
            Err(err) if db::retry_deadlock(&err, &mut retries) => continue,
            other => return other,
        }
    }
}

async fn cancel_once(
    db: &PgPool,
    now: OffsetDateTime,
    order_id: OrderId,
    secret: Option<&CancelSecret>,
) -> Result<Order, AppError> {
    let hash = secret.map(CancelSecret::hash);
    let mut tx = db.begin().await?;
    let order = sqlx::query_file!(
        "sql/sale/cancel_order.sql",
        order_id.get(),
        hash.as_deref(),
        now,
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(order) = order else {
        tx.rollback().await?;
        return match secret_matches(db, order_id, hash.as_deref()).await? {
            None => Err(AppError::NotFound),
            Some(false) => Err(AppError::Forbidden(
                "Only the link from the order's confirmation can cancel it.",
            )),
            Some(true) => match find_by_id(db, order_id).await? {
                Some(order) if order.status.is_live() => Err(AppError::EventStarted),
                Some(order) if order.status == OrderStatus::Expired => Err(AppError::HoldExpired),
                Some(_) => Err(AppError::AlreadyCancelled),
                None => Err(AppError::NotFound),
            },
        };
    };
    return_tickets(
        &mut tx,
        now,
        order.ticket_type_id,
        &order.buyer_key,
        order.quantity,
        order.presale_code_id,
    )
    .await?;
    tx.commit().await?;
    find_by_id(db, order_id).await?.ok_or(AppError::NotFound)
}

/// Cancel a confirmed order of one of this organizer's events and return
/// its tickets to sale: the organizer API's cancel. The same transaction as
/// the buyer's [`cancel`], but the order is matched by its event's owner
/// instead of the cancel secret; the status check in the UPDATE makes a
/// second cancel (even a concurrent one) report
/// [`AppError::AlreadyCancelled`], so the tickets come back once. Another
/// organizer's order is [`AppError::NotFound`].
#[tracing::instrument(skip(db))]
pub async fn cancel_by_organizer(
    db: &PgPool,
    now: OffsetDateTime,
    organizer_id: OrganizerId,
    order_id: OrderId,
) -> Result<Order, AppError> {
    let mut retries = 0;
    loop {
        match cancel_owned_once(db, now, organizer_id, order_id).await {
            Err(err) if db::retry_deadlock(&err, &mut retries) => continue,
            other => return other,
        }
    }
}

async fn cancel_owned_once(
    db: &PgPool,
    now: OffsetDateTime,
    organizer_id: OrganizerId,
    order_id: OrderId,
) -> Result<Order, AppError> {
    let mut tx = db.begin().await?;
    let order = sqlx::query_file!(
        "sql/sale/cancel_order_owned.sql",
        order_id.get(),
        organizer_id.get(),
        now,
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(order) = order else {
        tx.rollback().await?;
        let order = db::order_sync::find_owned(db, organizer_id, order_id).await?;
        return Err(match order.status {
            OrderStatus::Held | OrderStatus::Confirmed => AppError::EventStarted,
            OrderStatus::Cancelled => AppError::AlreadyCancelled,
            OrderStatus::Expired => AppError::HoldExpired,
        });
    };
    return_tickets(
        &mut tx,
        now,
        order.ticket_type_id,
        &order.buyer_key,
        order.quantity,
        order.presale_code_id,
    )
    .await?;
    tx.commit().await?;
    tracing::info!(%order_id, "order cancelled by its organizer");
    find_by_id(db, order_id).await?.ok_or(AppError::NotFound)
}

/// The rest of a cancel's transaction, once its order is marked cancelled:
/// its tickets back on sale (offered to the waiting list first), its
/// presale code's uses given back and the buyer's holdings freed.
async fn return_tickets(
    tx: &mut sqlx::PgConnection,
    now: OffsetDateTime,
    ticket_type_id: uuid::Uuid,
    buyer_key: &str,
    quantity: i32,
    presale_code_id: Option<uuid::Uuid>,
) -> Result<(), AppError> {
    // The ticket type's row, then the code's, then the holdings: the
    // engine's batches lock in that order. The waiting list's offers come
    // last and take other buyers' holdings, which can meet another
    // transaction crosswise: `cancel` runs the whole again if Postgres
    // picks this one as a deadlock's victim.
    sqlx::query_file!("sql/sale/cancel_restock.sql", ticket_type_id, quantity)
        .execute(&mut *tx)
        .await?;
    if let Some(code_id) = presale_code_id {
        sqlx::query_file!("sql/sale/release_code.sql", code_id, quantity)
            .execute(&mut *tx)
            .await?;
    }
    sqlx::query_file!(
        "sql/sale/cancel_release_type.sql",
        ticket_type_id,
        buyer_key,
        quantity,
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query_file!(
        "sql/sale/cancel_release_event.sql",
        ticket_type_id,
        buyer_key,
        quantity,
    )
    .execute(&mut *tx)
    .await?;
    db::waitlist::offer_returned_stock(tx, ticket_type_id, now).await?;
    Ok(())
}

/// Whether `hash` is the order's cancel secret hash; `None` without the order.
async fn secret_matches(
    db: &PgPool,
    order_id: OrderId,
    hash: Option<&[u8]>,
) -> Result<Option<bool>, AppError> {
    Ok(
        sqlx::query_file_scalar!("sql/sale/cancel_secret_matches.sql", order_id.get(), hash,)
            .fetch_optional(db)
            .await?,
    )
}

/// Cancel an event: stop its sales, then cancel every live order and return
/// the tickets. Two transactions; once the first has committed, no purchase
/// takes a holdings row of the event any more, so the second cannot
/// deadlock with one:
/// 1. mark the event cancelled and set `sales_halted` on its ticket types.
///    Taking those row locks waits for purchases holding them to commit;
///    purchases that come later re-check `sales_halted` and refuse. The
///    outbox gets one `event.cancelled` row;
/// 2. cancel the live orders, zero the buyers' holdings and restore
///    `remaining`; the outbox gets one `order.cancelled` row per order
///    (reason `event_cancelled`, sequence 2), in the same statement. No purchase can succeed any more, so this is final; it
///    is safe to repeat, and calling this again finishes an interrupted run.
#[tracing::instrument(skip(db))]
pub async fn cancel_event(
    db: &PgPool,
    organizer_id: OrganizerId,
    event_id: EventId,
) -> Result<u64, AppError> {
    db::events::find_owned(db, organizer_id, event_id).await?;

    let mut tx = db.begin().await?;
    let marked = sqlx::query_file!(
        "sql/events/cancel_event_mark.sql",
        event_id.get(),
        organizer_id.get(),
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    sqlx::query_file!("sql/events/cancel_event_halt.sql", event_id.get())
        .execute(&mut *tx)
        .await?;
    // The event's own message, once: only the run that changed its status
    // writes it (a repeated call, finishing an interrupted run, does not).
    if marked > 0 {
        sqlx::query_file!("sql/events/cancel_event_outbox.sql", event_id.get())
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;

    let mut tx = db.begin().await?;
    let cancelled = sqlx::query_file!("sql/events/cancel_event_orders.sql", event_id.get(),)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    sqlx::query_file!("sql/events/cancel_event_release_types.sql", event_id.get(),)
        .execute(&mut *tx)
        .await?;
    sqlx::query_file!("sql/events/cancel_event_release_event.sql", event_id.get(),)
        .execute(&mut *tx)
        .await?;
    sqlx::query_file!("sql/events/cancel_event_restock.sql", event_id.get())
        .execute(&mut *tx)
        .await?;
    sqlx::query_file!("sql/events/cancel_event_release_codes.sql", event_id.get())
        .execute(&mut *tx)
        .await?;
    // Its waiting lists close: nothing will come back to offer.
    sqlx::query_file!("sql/events/cancel_event_close_lists.sql", event_id.get())
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    tracing::info!(%event_id, cancelled, "event cancelled");
    Ok(cancelled)
}
