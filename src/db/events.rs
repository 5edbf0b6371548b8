//! Events and their ticket types: create, edit, publish, read, list.

use std::collections::HashMap;

use sqlx::PgPool;
use time::OffsetDateTime;

use crate::{
    domain::{
        EVENTS_PER_PAGE, EventCursor, EventId, EventListQuery, EventStatus, InvalidField, NewEvent,
        NewTicketType, OrganizerId, Quotas, SaleState, SaleWindow, TicketTypeId,
    },
    error::AppError,
};

#[derive(Debug, Clone)]
pub struct Event {
    pub id: EventId,
    pub title: String,
    pub description: String,
    pub venue: String,
    pub starts_at: OffsetDateTime,
    pub sale_opens_at: OffsetDateTime,
    pub sale_closes_at: Option<OffsetDateTime>,
    pub status: EventStatus,
    /// Per buyer across the ticket types, if the organizer set a limit.
    pub max_per_buyer: Option<i32>,
    /// Orders are held this long for the buyer's confirmation by mail;
    /// `None`: confirmed at once.
    pub hold_seconds: Option<i32>,
}

impl Event {
    pub fn window(&self) -> SaleWindow {
        SaleWindow {
            status: self.status,
            opens_at: self.sale_opens_at,
            closes_at: self.sale_closes_at,
            starts_at: self.starts_at,
        }
    }

    pub fn sale_state(&self, now: OffsetDateTime) -> SaleState {
        self.window().state(now)
    }
}

#[derive(Debug, Clone)]
pub struct TicketType {
    pub id: TicketTypeId,
    pub event_id: EventId,
    pub name: String,
    pub price_minor: i64,
    pub currency: String,
    pub capacity: i32,
    pub remaining: i32,
    pub max_per_order: i32,
    pub max_per_buyer: i32,
    /// Sales stopped for good (the event was cancelled).
    pub sales_halted: bool,
    /// Tickets in held orders, waiting for their buyers' confirmation:
    /// taken from `remaining`, but they may come back.
    pub held: i64,
    /// Shown and sold only with a presale code that unlocks it.
    pub hidden: bool,
}

/// An event with its ticket types, in their order.
#[derive(Debug, Clone)]
pub struct EventDetail {
    pub event: Event,
    pub ticket_types: Vec<TicketType>,
}

impl EventDetail {
    pub fn sold_out(&self) -> bool {
        self.ticket_types.iter().all(|t| t.remaining == 0)
    }

    /// Tickets of every type.
    pub fn capacity(&self) -> i64 {
        self.ticket_types
            .iter()
            .map(|t| i64::from(t.capacity))
            .sum()
    }

    /// Tickets of every type in held orders (they may come back).
    pub fn held(&self) -> i64 {
        self.ticket_types.iter().map(|t| t.held).sum()
    }

    /// Tickets of every type still on sale.
    pub fn remaining(&self) -> i64 {
        self.ticket_types
            .iter()
            .map(|t| i64::from(t.remaining))
            .sum()
    }
}

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

/// Take the organizer's row lock for the rest of the transaction: writes
/// that a quota counts queue on it, so each counts what the last committed.
pub(super) async fn lock_organizer(
    tx: &mut sqlx::PgConnection,
    organizer_id: OrganizerId,
) -> Result<(), AppError> {
    sqlx::query_file!("sql/events/lock_organizer.sql", organizer_id.get())
        .fetch_optional(tx)
        .await?;
    Ok(())
}

/// After a write, with the organizer's row locked: refuse (roll back) what
/// takes the organizer past a quota. The published-events quota is checked
/// only when this write publishes, so an organizer over a lowered quota can
/// still edit.
async fn check_quotas(
    tx: &mut sqlx::PgConnection,
    organizer_id: OrganizerId,
    event_id: EventId,
    quotas: &Quotas,
    publishes: bool,
) -> Result<(), AppError> {
    let counts = sqlx::query!(
        r#"SELECT
             (SELECT count(*) FROM events WHERE organizer_id = $1 AND status = 'published')
                 AS "published!",
             (SELECT count(*) FROM ticket_types WHERE event_id = $2) AS "ticket_types!",
             (SELECT COALESCE(SUM(t.capacity), 0)::int8 FROM ticket_types t
                  JOIN events e ON e.id = t.event_id
                  WHERE e.organizer_id = $1 AND e.status <> 'cancelled') AS "capacity!""#,
        organizer_id.get(),
        event_id.get(),
    )
    .fetch_one(tx)
    .await?;
    let refuse =
        |field: &str, message: String| Err(AppError::Invalid(InvalidField::new(field, message)));
    if counts.ticket_types > quotas.ticket_types_per_event {
        return refuse(
            "ticket_types",
            format!(
                "An event can have at most {} ticket types; this one would have {}.",
                quotas.ticket_types_per_event, counts.ticket_types
            ),
        );
    }
    if publishes && counts.published > quotas.published_events {
        return refuse(
            "status",
            format!(
                "You can have at most {} published events at once; unpublish or cancel one first.",
                quotas.published_events
            ),
        );
    }
    if counts.capacity > quotas.total_capacity {
        return refuse(
            "ticket_types",
            format!(
                "Your events together can hold at most {} tickets; this would make {}.",
                quotas.total_capacity, counts.capacity
            ),
        );
    }
    Ok(())
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
            Err(err) if super::retry_deadlock(&err, &mut retries) => continue,
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
        super::waitlist::offer_returned_stock(&mut tx, id.get(), now).await?;
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

/// Publish or unpublish; cancelling an event is the sale path's (`src/sale/cancel.rs`).
pub async fn set_status(
    db: &PgPool,
    organizer_id: OrganizerId,
    quotas: &Quotas,
    event_id: EventId,
    status: EventStatus,
) -> Result<(), AppError> {
    let mut tx = db.begin().await?;
    lock_organizer(&mut tx, organizer_id).await?;
    let updated = sqlx::query_file!(
        "sql/events/set_status.sql",
        event_id.get(),
        organizer_id.get(),
        status.as_str(),
    )
    .execute(&mut *tx)
    .await?;
    if updated.rows_affected() != 1 {
        return Err(AppError::NotFound);
    }
    let publishes = status == EventStatus::Published;
    check_quotas(&mut tx, organizer_id, event_id, quotas, publishes).await?;
    tx.commit().await?;
    Ok(())
}

/// One event with its ticket types, whatever its status.
pub async fn find(db: &PgPool, event_id: EventId) -> Result<Option<EventDetail>, AppError> {
    find_where(db, event_id, None).await
}

/// An event of this organizer's; any other organizer's is "not found".
pub async fn find_owned(
    db: &PgPool,
    organizer_id: OrganizerId,
    event_id: EventId,
) -> Result<EventDetail, AppError> {
    find_where(db, event_id, Some(organizer_id))
        .await?
        .ok_or(AppError::NotFound)
}

/// One event with its ticket types, if it exists (and has this owner).
async fn find_where(
    db: &PgPool,
    event_id: EventId,
    owner: Option<OrganizerId>,
) -> Result<Option<EventDetail>, AppError> {
    let event = sqlx::query_as!(
        Event,
        r#"SELECT id, title, description, venue, starts_at, sale_opens_at, sale_closes_at,
                  status AS "status: EventStatus", max_per_buyer, hold_seconds
           FROM events WHERE id = $1 AND ($2::uuid IS NULL OR organizer_id = $2)"#,
        event_id.get(),
        owner.map(OrganizerId::get),
    )
    .fetch_optional(db)
    .await?;
    Ok(with_ticket_types(db, Vec::from_iter(event)).await?.pop())
}

/// A published event, as buyers may see it: without its hidden ticket
/// types (a presale code shows those, `db::presale::unlocked_hidden`).
pub async fn find_published(db: &PgPool, event_id: EventId) -> Result<EventDetail, AppError> {
    match find(db, event_id).await? {
        Some(mut detail) if detail.event.status != EventStatus::Draft => {
            detail.ticket_types.retain(|t| !t.hidden);
            Ok(detail)
        }
        _ => Err(AppError::NotFound),
    }
}

/// One page of the events buyers can see (published, not yet started),
/// soonest first, without their descriptions (empty), and where the next
/// page starts if there is one. Keyset pagination on `(starts_at, id)`:
/// every page costs the same, however deep.
pub async fn list_published_page(
    db: &PgPool,
    now: OffsetDateTime,
    after: Option<EventCursor>,
) -> Result<(Vec<EventDetail>, Option<EventCursor>), AppError> {
    let (after_starts, after_id) = after.map(|c| (c.starts_at, c.id.get())).unzip();
    let mut events = sqlx::query_as!(
        Event,
        r#"SELECT id, title, '' AS "description!", venue, starts_at, sale_opens_at, sale_closes_at,
                  status AS "status: EventStatus", max_per_buyer, hold_seconds
           FROM events
           WHERE status = 'published' AND starts_at > $1
             AND (starts_at, id) > (COALESCE($2, '-infinity'::timestamptz),
                                    COALESCE($3, '00000000-0000-0000-0000-000000000000'::uuid))
           ORDER BY starts_at, id LIMIT $4"#,
        now,
        after_starts,
        after_id,
        EVENTS_PER_PAGE + 1,
    )
    .fetch_all(db)
    .await?;
    let next = if events.len() as i64 > EVENTS_PER_PAGE {
        events.truncate(EVENTS_PER_PAGE as usize);
        events.last().map(|e| EventCursor {
            starts_at: e.starts_at,
            id: e.id,
        })
    } else {
        None
    };
    let mut details = with_ticket_types(db, events).await?;
    for detail in &mut details {
        detail.ticket_types.retain(|t| !t.hidden);
    }
    Ok((details, next))
}

/// One organizer's events, whatever their status.
pub async fn list_for_organizer(
    db: &PgPool,
    organizer_id: OrganizerId,
) -> Result<Vec<EventDetail>, AppError> {
    list(db, Some(organizer_id), OffsetDateTime::UNIX_EPOCH).await
}

/// One page of an organizer's events, whatever their status, in
/// `(starts_at, id)` order (keyset, as the public list), and where the next
/// page starts if there is one: the organizer API's list.
pub async fn list_for_organizer_page(
    db: &PgPool,
    organizer_id: OrganizerId,
    query: EventListQuery,
) -> Result<(Vec<EventDetail>, Option<EventCursor>), AppError> {
    let (after_starts, after_id) = query.after.map(|c| (c.starts_at, c.id.get())).unzip();
    let mut events = sqlx::query_as!(
        Event,
        r#"SELECT id, title, description, venue, starts_at, sale_opens_at, sale_closes_at,
                  status AS "status: EventStatus", max_per_buyer, hold_seconds
           FROM events
           WHERE organizer_id = $1
             AND (starts_at, id) > (COALESCE($2, '-infinity'::timestamptz),
                                    COALESCE($3, '00000000-0000-0000-0000-000000000000'::uuid))
           ORDER BY starts_at, id LIMIT $4"#,
        organizer_id.get(),
        after_starts,
        after_id,
        query.limit + 1,
    )
    .fetch_all(db)
    .await?;
    let next = if events.len() as i64 > query.limit {
        events.truncate(query.limit as usize);
        events.last().map(|e| EventCursor {
            starts_at: e.starts_at,
            id: e.id,
        })
    } else {
        None
    };
    Ok((with_ticket_types(db, events).await?, next))
}

/// Every event of one organizer, with their ticket types, in two queries.
async fn list(
    db: &PgPool,
    organizer_id: Option<OrganizerId>,
    now: OffsetDateTime,
) -> Result<Vec<EventDetail>, AppError> {
    let events = sqlx::query_as!(
        Event,
        r#"SELECT id, title, description, venue, starts_at, sale_opens_at, sale_closes_at,
                  status AS "status: EventStatus", max_per_buyer, hold_seconds
           FROM events
           WHERE CASE WHEN $1::uuid IS NULL THEN status = 'published' AND starts_at > $2
                      ELSE organizer_id = $1 END
           ORDER BY starts_at, id LIMIT 500"#,
        organizer_id.map(OrganizerId::get),
        now,
    )
    .fetch_all(db)
    .await?;
    with_ticket_types(db, events).await
}

/// Attach each event's ticket types, read in one query.
async fn with_ticket_types(db: &PgPool, events: Vec<Event>) -> Result<Vec<EventDetail>, AppError> {
    let ids: Vec<_> = events.iter().map(|e| e.id.get()).collect();
    let ticket_types = sqlx::query_as!(
        TicketType,
        r#"SELECT t.id, t.event_id, t.name, t.price_minor, t.currency, t.capacity, t.remaining,
                  t.max_per_order, t.max_per_buyer, t.sales_halted, t.hidden,
                  (SELECT coalesce(sum(o.quantity), 0) FROM orders o
                   WHERE o.ticket_type_id = t.id AND o.status = 'held') AS "held!"
           FROM ticket_types t WHERE t.event_id = ANY($1) ORDER BY t.position, t.created_at"#,
        &ids,
    )
    .fetch_all(db)
    .await?;
    let index: HashMap<EventId, usize> =
        events.iter().enumerate().map(|(i, e)| (e.id, i)).collect();
    let mut details: Vec<EventDetail> = events
        .into_iter()
        .map(|event| EventDetail {
            event,
            ticket_types: Vec::new(),
        })
        .collect();
    for tt in ticket_types {
        if let Some(&i) = index.get(&tt.event_id) {
            details[i].ticket_types.push(tt);
        }
    }
    Ok(details)
}
