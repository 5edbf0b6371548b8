//! The offers: tickets that came back go to the first in line, inside the
//! transaction that freed them (see the module above), and the organizer's
//! switch.

use sqlx::{Connection as _, PgConnection, PgPool};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::{
    db,
    domain::{EventId, OrganizerId},
    error::AppError,
};

/// Offer what `ticket_type_id` has on sale to its waiting list, first in
/// line first, as held orders; returns how many offers were made. Call it
/// inside the transaction that gave tickets back, after the statement that
/// did: it holds the ticket type's row lock, so the tickets counted here
/// are the ones this transaction sees until it commits. (An event edit
/// calls it for every type it saved: a raised capacity, or tickets on sale
/// while people wait, go to the line.) Nothing is
/// offered while the event's offers are off, the type is hidden or halted,
/// or its sale is not open at `now`.
///
/// Each person gets what they asked for, or what came back if that is less,
/// within the type's per-order and per-buyer limits and the event's. One
/// who already holds their limit is passed over (`passed`): the line moves on.
pub async fn offer_returned_stock(
    tx: &mut PgConnection,
    ticket_type_id: Uuid,
    now: OffsetDateTime,
) -> Result<u32, AppError> {
    let mut offers = 0;
    loop {
        let Some(next) = sqlx::query_file!("sql/waitlist/next_in_line.sql", ticket_type_id, now)
            .fetch_optional(&mut *tx)
            .await?
        else {
            break;
        };
        let made = if next.offer > 0 {
            offer(
                tx,
                ticket_type_id,
                now,
                next.id,
                &next.buyer_key,
                next.offer,
            )
            .await?
        } else {
            Offer::OverLimit
        };
        match made {
            Offer::Made => {
                offers += 1;
                continue;
            }
            // Not expected (the row was read under its lock): stop, and
            // leave the line as it is.
            Offer::NoStock => break,
            Offer::OverLimit => {}
        }
        sqlx::query_file!("sql/waitlist/pass_entry.sql", next.id)
            .execute(&mut *tx)
            .await?;
        tracing::info!(entry_id = %next.id, "waiting list place passed over: the buyer holds their limit");
    }
    if offers > 0 {
        metrics::counter!("stampede_waitlist_offers_total").increment(u64::from(offers));
        tracing::info!(%ticket_type_id, offers, "returned tickets offered to the waiting list");
    }
    Ok(offers)
}

/// What one offer did.
enum Offer {
    Made,
    /// The buyer's limits refuse it (they bought meanwhile): nothing written.
    OverLimit,
    /// The stock UPDATE refused it: nothing written.
    NoStock,
}

/// One offer, in a savepoint: the held order with the sale's own
/// statements (the buyer's limits, then the conditional stock UPDATE).
async fn offer(
    tx: &mut PgConnection,
    ticket_type_id: Uuid,
    now: OffsetDateTime,
    entry_id: Uuid,
    buyer_key: &str,
    quantity: i32,
) -> Result<Offer, AppError> {
    let mut offer = tx.begin().await?;
    let order_id =
        sqlx::query_file_scalar!("sql/waitlist/offer_order.sql", entry_id, quantity, now)
            .fetch_optional(&mut *offer)
            .await?;
    let held = sqlx::query_file_scalar!(
        "sql/sale/hold_ticket_type.sql",
        ticket_type_id,
        buyer_key,
        quantity,
    )
    .fetch_optional(&mut *offer)
    .await?;
    let held_in_event = sqlx::query_file_scalar!(
        "sql/sale/hold_event.sql",
        ticket_type_id,
        buyer_key,
        quantity
    )
    .fetch_optional(&mut *offer)
    .await?;
    let taken = sqlx::query_file_scalar!("sql/sale/take_stock.sql", ticket_type_id, quantity, now)
        .fetch_optional(&mut *offer)
        .await?;
    let made = match (order_id, held, held_in_event, taken) {
        (Some(_), Some(_), Some(_), Some(_)) => Offer::Made,
        (_, _, _, None) | (None, _, _, _) => Offer::NoStock,
        _ => Offer::OverLimit,
    };
    if matches!(made, Offer::Made) {
        offer.commit().await?;
    } else {
        offer.rollback().await?;
    }
    Ok(made)
}

/// Offer returned stock of every ticket type of the event (each type's
/// row locked first, in id order): when the organizer switches offers on.
async fn offer_event_stock(
    tx: &mut PgConnection,
    event_id: EventId,
    now: OffsetDateTime,
) -> Result<u32, AppError> {
    let types = sqlx::query_file_scalar!("sql/waitlist/lock_event_types.sql", event_id.get())
        .fetch_all(&mut *tx)
        .await?;
    let mut offers = 0;
    for ticket_type_id in types {
        offers += offer_returned_stock(tx, ticket_type_id, now).await?;
    }
    Ok(offers)
}

/// Turn the event's automatic offers on or off. Turning them on offers
/// what is on sale now to those in line; returns how many offers that made.
pub async fn set_offers(
    db: &PgPool,
    organizer_id: OrganizerId,
    event_id: EventId,
    on: bool,
    now: OffsetDateTime,
) -> Result<u32, AppError> {
    let mut retries = 0;
    loop {
        match set_offers_once(db, organizer_id, event_id, on, now).await {
            Err(err) if db::retry_deadlock(&err, &mut retries) => continue,
            other => return other,
        }
    }
}

async fn set_offers_once(
    db: &PgPool,
    organizer_id: OrganizerId,
    event_id: EventId,
    on: bool,
    now: OffsetDateTime,
) -> Result<u32, AppError> {
    let mut tx = db.begin().await?;
    // The organizer's row first, as an event edit takes it: the two queue.
    db::events::lock_organizer(&mut tx, organizer_id).await?;
    let updated = sqlx::query_scalar!(
        "UPDATE events SET waitlist_offers = $3 WHERE id = $1 AND organizer_id = $2 RETURNING id",
        event_id.get(),
        organizer_id.get(),
        on,
    )
    .fetch_optional(&mut *tx)
    .await?;
    if updated.is_none() {
        return Err(AppError::NotFound);
    }
    let offers = if on {
        offer_event_stock(&mut tx, event_id, now).await?
    } else {
        0
    };
    tx.commit().await?;
    tracing::info!(%event_id, on, offers, "waiting list offers switched");
    Ok(offers)
}
