//! Creating and editing events and their ticket types, each write under
//! the organizer's lock and quotas.

use sqlx::PgPool;
use time::OffsetDateTime;

use super::guard::{check_quotas, lock_organizer};
use crate::{
    db,
    domain::{
        EventId, EventStatus, InvalidField, NewEvent, NewTicketType, OrganizerId, Quotas,
        TicketTypeId,
    },
    error::AppError,
};

pub async fn create(
    db: &PgPool,
    organizer_id: OrganizerId,
    quotas: &Quotas,
    new: &NewEvent,
) -> Result<EventId, AppError> {
    let mut tx = db.begin().await?;
    lock_organizer(&mut tx, organizer_id).await?;
    let event_id = save(&mut tx, organizer_id, None, new)
        .await?
        .ok_or_else(|| AppError::internal(anyhow::anyhow!("the event insert returned no row")))?;
    for (position, tt) in new.ticket_types.iter().enumerate() {
        insert_ticket_type(&mut tx, event_id, position as i32, tt).await?;
    }
    let publishes = new.window.status == EventStatus::Published;
    check_quotas(&mut tx, organizer_id, event_id, quotas, publishes).await?;
    tx.commit().await?;
    tracing::info!(%event_id, "event created");
    Ok(event_id)
}

/// Write an event's own columns, in one statement for both cases: a new
/// event (`event_id` is `None`; its status is `new`'s), or an edit of one of
/// this organizer's events that is not cancelled (its status is left alone;
/// `None` comes back when there is no such event).
async fn save(
    tx: &mut sqlx::PgConnection,
    organizer_id: OrganizerId,
    event_id: Option<EventId>,
    new: &NewEvent,
) -> Result<Option<EventId>, AppError> {
    let saved = sqlx::query_file_scalar!(
        "sql/events/save.sql",
        event_id.map(EventId::get),
        organizer_id.get(),
        new.title,
        new.description,
        new.venue,
        new.starts_at,
        new.window.opens_at,
        new.window.closes_at,
        new.window.status.as_str(),
        new.max_per_buyer,
        new.hold_seconds,
        new.pay_seconds,
        new.takes_payment,
        new.zone.name(),
    )
    .fetch_optional(tx)
    .await?;
    Ok(saved.map(EventId::from))
}

async fn insert_ticket_type(
    tx: &mut sqlx::PgConnection,
    event_id: EventId,
    position: i32,
    tt: &NewTicketType,
) -> Result<TicketTypeId, AppError> {
    Ok(sqlx::query_scalar!(
        "INSERT INTO ticket_types
             (event_id, position, name, price_minor, currency, capacity, remaining, max_per_order,
              max_per_buyer, hidden)
         VALUES ($1, $2, $3, $4, $5, $6, $6, $7, $8, $9) RETURNING id",
        event_id.get(),
        position,
        tt.name,
        tt.price.minor,
        tt.price.currency.as_str(),
        tt.capacity,
        tt.max_per_order,
        tt.max_per_buyer,
        tt.hidden,
    )
    .fetch_one(tx)
    .await?
    .into())
}

/// Replace an event's details and ticket types. A capacity change moves
/// `remaining` by the same amount in the same statement, so it cannot race a
/// sale; lowering it below what is sold is refused. Ticket types are never
/// deleted, so the quota of ticket types per event counts the event's
/// existing types with the new ones; concurrent edits queue on the
/// organizer's row, so each counts what the one before it committed.
pub async fn update(
    db: &PgPool,
    organizer_id: OrganizerId,
    quotas: &Quotas,
    event_id: EventId,
    new: &NewEvent,
    now: OffsetDateTime,
) -> Result<(), AppError> {
    // Its waiting list offers can meet a cancel crosswise (see
    // `retry_deadlock`).
    let mut retries = 0;
    loop {
        match update_once(db, organizer_id, quotas, event_id, new, now).await {
            Err(err) if db::retry_deadlock(&err, &mut retries) => continue,
            other => return other,
        }
    }
}

async fn update_once(
    db: &PgPool,
    organizer_id: OrganizerId,
    quotas: &Quotas,
    event_id: EventId,
    new: &NewEvent,
    now: OffsetDateTime,
) -> Result<(), AppError> {
    let mut tx = db.begin().await?;
    lock_organizer(&mut tx, organizer_id).await?;
    if save(&mut tx, organizer_id, Some(event_id), new)
        .await?
        .is_none()
    {
        return Err(AppError::NotFound);
    }
    for (position, tt) in new.ticket_types.iter().enumerate() {
        let Some(id) = tt.id else {
            insert_ticket_type(&mut tx, event_id, position as i32, tt).await?;
            continue;
        };
        let row = sqlx::query_file!(
            "sql/events/update_ticket_type.sql",
            id.get(),
            event_id.get(),
            tt.name,
            tt.price.minor,
            tt.price.currency.as_str(),
            tt.max_per_order,
            tt.max_per_buyer,
            position as i32,
            tt.capacity,
            tt.hidden,
        )
        .fetch_optional(&mut *tx)
        .await?;
        if row.is_none() {
            let sold = sqlx::query_file_scalar!(
                "sql/events/sold_of_ticket_type.sql",
                id.get(),
                event_id.get()
            )
            .fetch_optional(&mut *tx)
            .await?
            .flatten();
            return Err(match sold {
                None => AppError::NotFound,
                Some(sold) => AppError::Invalid(InvalidField::new(
                    format!("ticket_types[{}].capacity", tt.row),
                    format!(
                        "{sold} tickets of \"{}\" are already sold; the capacity cannot go below that.",
                        tt.name
                    ),
                )),
            });
        }
    }
    check_holdings(&mut tx, event_id, new).await?;
    check_quotas(&mut tx, organizer_id, event_id, quotas, false).await?;
    // A raised capacity goes to the waiting lists first, in this
    // transaction (the edit holds every type's row lock).
    for id in new.ticket_types.iter().filter_map(|tt| tt.id) {
        db::waitlist::offer_returned_stock(&mut tx, id.get(), now).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Refuse a limit per buyer lowered below what a buyer already holds, as a
/// capacity below what is sold is: every buyer stays within the limits
/// (the invariant the tests check from the tables). Race-free against the
/// engine: the edit has written, and so locked, every ticket type row of
/// the event, and a batch locks its ticket type row before it reads either
/// limit. The `naive` comparison baseline reads the limits before it locks
/// the row (at its final UPDATE), so one of its purchases in flight can
/// still end above a limit lowered at that moment.
async fn check_holdings(
    tx: &mut sqlx::PgConnection,
    event_id: EventId,
    new: &NewEvent,
) -> Result<(), AppError> {
    let over_type = sqlx::query_file!("sql/events/type_holdings_over_limit.sql", event_id.get())
        .fetch_optional(&mut *tx)
        .await?;
    if let Some(over) = over_type
        && let Some(tt) = new
            .ticket_types
            .iter()
            .find(|tt| tt.id.map(TicketTypeId::get) == Some(over.id))
    {
        return Err(AppError::Invalid(InvalidField::new(
            format!("ticket_types[{}].max_per_buyer", tt.row),
            format!(
                "A buyer already holds {} tickets of \"{}\"; the limit per buyer cannot go below that.",
                over.held, tt.name
            ),
        )));
    }
    let over_event =
        sqlx::query_file_scalar!("sql/events/event_holdings_over_limit.sql", event_id.get())
            .fetch_one(&mut *tx)
            .await?;
    if let Some(held) = over_event {
        return Err(AppError::Invalid(InvalidField::new(
            "max_per_buyer",
            format!(
                "A buyer already holds {held} tickets of this event; the limit per buyer cannot go below that."
            ),
        )));
    }
    Ok(())
}

/// Delete a ticket type of one of this organizer's events, only while
/// nothing of it is sold and no order (even a cancelled one) names it, and
/// never the event's last one. The DELETE itself checks `remaining =
/// capacity` on the row it deletes: a purchase holding that row commits
/// first and the re-check refuses, and a purchase that comes after finds no
/// row. Ticket type changes queue on the organizer's row.
pub async fn delete_ticket_type(
    db: &PgPool,
    organizer_id: OrganizerId,
    event_id: EventId,
    ticket_type_id: TicketTypeId,
) -> Result<(), AppError> {
    let mut tx = db.begin().await?;
    lock_organizer(&mut tx, organizer_id).await?;
    let deleted = sqlx::query_file!(
        "sql/events/delete_ticket_type.sql",
        ticket_type_id.get(),
        event_id.get(),
        organizer_id.get(),
    )
    .execute(&mut *tx)
    .await?;
    if deleted.rows_affected() == 1 {
        tx.commit().await?;
        tracing::info!(%event_id, %ticket_type_id, "ticket type deleted");
        return Ok(());
    }
    // Why not, in the same transaction (the organizer's row still locked).
    let why = sqlx::query!(
        r#"SELECT (t.capacity - t.remaining)::int8 AS "sold!",
                  (SELECT count(*) FROM orders o WHERE o.ticket_type_id = t.id) AS "orders!",
                  (SELECT count(*) FROM ticket_types s WHERE s.event_id = t.event_id) AS "types!",
                  e.status = 'cancelled' AS "cancelled!"
           FROM ticket_types t JOIN events e ON e.id = t.event_id
           WHERE t.id = $1 AND t.event_id = $2 AND e.organizer_id = $3"#,
        ticket_type_id.get(),
        event_id.get(),
        organizer_id.get(),
    )
    .fetch_optional(&mut *tx)
    .await?;
    tx.rollback().await?;
    Err(match why {
        None => AppError::NotFound,
        Some(why) if why.cancelled => AppError::EventCancelled,
        Some(why) if why.sold > 0 || why.orders > 0 => AppError::TicketTypeSold { sold: why.sold },
        Some(why) if why.types <= 1 => AppError::LastTicketType,
        // Sold or deleted between the two statements: refused either way.
        Some(why) => AppError::TicketTypeSold { sold: why.sold },
    })
}
