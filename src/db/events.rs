use serde::Serialize;
use sqlx::PgPool;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::{
    domain::{EventStatus, InvalidField, NewEvent},
    error::AppError,
};

#[derive(Debug, Clone, Serialize)]
pub struct Event {
    pub id: Uuid,
    pub title: String,
    pub description: String,
    pub venue: String,
    #[serde(with = "time::serde::rfc3339")]
    pub starts_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub sale_opens_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub sale_closes_at: Option<OffsetDateTime>,
    pub status: String,
}

impl Event {
    pub fn status(&self) -> EventStatus {
        EventStatus::from_db(&self.status)
    }

    pub fn sale_state(&self, now: OffsetDateTime) -> SaleState {
        match self.status() {
            EventStatus::Draft => SaleState::Draft,
            EventStatus::Cancelled => SaleState::Cancelled,
            EventStatus::Published if now < self.sale_opens_at => SaleState::NotOpenYet,
            EventStatus::Published if self.sale_closes_at.is_some_and(|c| now >= c) => {
                SaleState::Closed
            }
            EventStatus::Published => SaleState::Open,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaleState {
    Draft,
    NotOpenYet,
    Open,
    Closed,
    Cancelled,
}

#[derive(Debug, Clone, Serialize)]
pub struct TicketType {
    pub id: Uuid,
    pub name: String,
    pub price_minor: i64,
    pub currency: String,
    pub capacity: i32,
    pub remaining: i32,
    pub max_per_order: i32,
    pub max_per_buyer: i32,
}

#[derive(Debug, Clone, Serialize)]
pub struct EventDetail {
    #[serde(flatten)]
    pub event: Event,
    pub ticket_types: Vec<TicketType>,
}

impl EventDetail {
    pub fn sold_out(&self) -> bool {
        self.ticket_types.iter().all(|t| t.remaining == 0)
    }
}

#[derive(Debug, Clone)]
pub struct EventSummary {
    pub id: Uuid,
    pub title: String,
    pub venue: String,
    pub starts_at: OffsetDateTime,
    pub sale_opens_at: OffsetDateTime,
    pub status: String,
    pub capacity: i64,
    pub remaining: i64,
}

pub async fn create(db: &PgPool, organizer_id: Uuid, new: &NewEvent) -> Result<Uuid, AppError> {
    let mut tx = db.begin().await?;
    let event_id = sqlx::query_scalar!(
        "INSERT INTO events (organizer_id, title, description, venue, starts_at, sale_opens_at, sale_closes_at, status)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
        organizer_id,
        new.title,
        new.description,
        new.venue,
        new.starts_at,
        new.sale_opens_at,
        new.sale_closes_at,
        new.status.as_str(),
    )
    .fetch_one(&mut *tx)
    .await?;
    for (position, tt) in new.ticket_types.iter().enumerate() {
        insert_ticket_type(&mut tx, event_id, position as i32, tt).await?;
    }
    tx.commit().await?;
    tracing::info!(%event_id, "event created");
    Ok(event_id)
}

async fn insert_ticket_type(
    tx: &mut sqlx::PgConnection,
    event_id: Uuid,
    position: i32,
    tt: &crate::domain::NewTicketType,
) -> Result<Uuid, AppError> {
    Ok(sqlx::query_scalar!(
        "INSERT INTO ticket_types
             (event_id, position, name, price_minor, currency, capacity, remaining, max_per_order, max_per_buyer)
         VALUES ($1, $2, $3, $4, $5, $6, $6, $7, $8) RETURNING id",
        event_id,
        position,
        tt.name,
        tt.price.minor,
        tt.price.currency.as_str(),
        tt.capacity,
        tt.max_per_order,
        tt.max_per_buyer,
    )
    .fetch_one(tx)
    .await?)
}

/// Replace an event's details and ticket types. A capacity change moves
/// `remaining` by the same amount in the same statement, so it cannot race a
/// sale; lowering it below what is sold is refused.
pub async fn update(
    db: &PgPool,
    organizer_id: Uuid,
    event_id: Uuid,
    new: &NewEvent,
) -> Result<(), AppError> {
    let mut tx = db.begin().await?;
    let updated = sqlx::query!(
        "UPDATE events SET title = $3, description = $4, venue = $5, starts_at = $6,
                sale_opens_at = $7, sale_closes_at = $8, updated_at = now()
         WHERE id = $1 AND organizer_id = $2 AND status <> 'cancelled'",
        event_id,
        organizer_id,
        new.title,
        new.description,
        new.venue,
        new.starts_at,
        new.sale_opens_at,
        new.sale_closes_at,
    )
    .execute(&mut *tx)
    .await?;
    if updated.rows_affected() != 1 {
        return Err(AppError::NotFound);
    }
    for (position, tt) in new.ticket_types.iter().enumerate() {
        let Some(id) = tt.id else {
            insert_ticket_type(&mut tx, event_id, position as i32, tt).await?;
            continue;
        };
        let row = sqlx::query!(
            "UPDATE ticket_types
             SET name = $3, price_minor = $4, currency = $5, max_per_order = $6, max_per_buyer = $7,
                 position = $8, remaining = remaining + ($9 - capacity), capacity = $9
             WHERE id = $1 AND event_id = $2 AND remaining + ($9 - capacity) >= 0
             RETURNING id",
            id,
            event_id,
            tt.name,
            tt.price.minor,
            tt.price.currency.as_str(),
            tt.max_per_order,
            tt.max_per_buyer,
            position as i32,
            tt.capacity,
        )
        .fetch_optional(&mut *tx)
        .await?;
        if row.is_none() {
            let sold = sqlx::query_scalar!(
                "SELECT capacity - remaining FROM ticket_types WHERE id = $1 AND event_id = $2",
                id,
                event_id
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
    tx.commit().await?;
    Ok(())
}

/// Publish or unpublish; cancelling is `sale::cancel_event`.
pub async fn set_status(
    db: &PgPool,
    organizer_id: Uuid,
    event_id: Uuid,
    status: EventStatus,
) -> Result<(), AppError> {
    let updated = sqlx::query!(
        "UPDATE events SET status = $3, updated_at = now()
         WHERE id = $1 AND organizer_id = $2 AND status <> 'cancelled'",
        event_id,
        organizer_id,
        status.as_str(),
    )
    .execute(db)
    .await?;
    if updated.rows_affected() == 1 {
        Ok(())
    } else {
        Err(AppError::NotFound)
    }
}

/// One event with its ticket types, whatever its status.
pub async fn find(db: &PgPool, event_id: Uuid) -> Result<Option<EventDetail>, AppError> {
    find_where(db, event_id, None).await
}

/// An event of this organizer's; any other organizer's is "not found".
pub async fn find_owned(
    db: &PgPool,
    organizer_id: Uuid,
    event_id: Uuid,
) -> Result<EventDetail, AppError> {
    find_where(db, event_id, Some(organizer_id))
        .await?
        .ok_or(AppError::NotFound)
}

/// One event with its ticket types, if it exists (and has this owner).
async fn find_where(
    db: &PgPool,
    event_id: Uuid,
    owner: Option<Uuid>,
) -> Result<Option<EventDetail>, AppError> {
    let event = sqlx::query_as!(
        Event,
        "SELECT id, title, description, venue, starts_at, sale_opens_at, sale_closes_at, status
         FROM events WHERE id = $1 AND ($2::uuid IS NULL OR organizer_id = $2)",
        event_id,
        owner as Option<Uuid>,
    )
    .fetch_optional(db)
    .await?;
    let Some(event) = event else { return Ok(None) };
    let ticket_types = sqlx::query_as!(
        TicketType,
        "SELECT id, name, price_minor, currency, capacity, remaining, max_per_order, max_per_buyer
         FROM ticket_types WHERE event_id = $1 ORDER BY position, created_at",
        event_id,
    )
    .fetch_all(db)
    .await?;
    Ok(Some(EventDetail {
        event,
        ticket_types,
    }))
}

/// A published event, as buyers may see it.
pub async fn find_published(db: &PgPool, event_id: Uuid) -> Result<EventDetail, AppError> {
    match find(db, event_id).await? {
        Some(detail) if detail.event.status() != EventStatus::Draft => Ok(detail),
        _ => Err(AppError::NotFound),
    }
}

/// Events buyers can see (published, not yet started), soonest first.
pub async fn list_published(
    db: &PgPool,
    now: OffsetDateTime,
) -> Result<Vec<EventSummary>, AppError> {
    list(db, None, now).await
}

/// One organizer's events, whatever their status.
pub async fn list_for_organizer(
    db: &PgPool,
    organizer_id: Uuid,
) -> Result<Vec<EventSummary>, AppError> {
    list(db, Some(organizer_id), OffsetDateTime::UNIX_EPOCH).await
}

/// Published upcoming events for buyers, or every event of one organizer.
async fn list(
    db: &PgPool,
    organizer_id: Option<Uuid>,
    now: OffsetDateTime,
) -> Result<Vec<EventSummary>, AppError> {
    Ok(sqlx::query_as!(
        EventSummary,
        r#"SELECT e.id, e.title, e.venue, e.starts_at, e.sale_opens_at, e.status,
                  COALESCE(SUM(t.capacity), 0)::int8 AS "capacity!",
                  COALESCE(SUM(t.remaining), 0)::int8 AS "remaining!"
           FROM events e LEFT JOIN ticket_types t ON t.event_id = e.id
           WHERE CASE WHEN $1::uuid IS NULL THEN e.status = 'published' AND e.starts_at > $2
                      ELSE e.organizer_id = $1 END
           GROUP BY e.id
           ORDER BY e.starts_at, e.id
           LIMIT 500"#,
        organizer_id as Option<Uuid>,
        now,
    )
    .fetch_all(db)
    .await?)
}

/// Published upcoming events with their ticket types, in two queries.
pub async fn list_published_details(
    db: &PgPool,
    now: OffsetDateTime,
) -> Result<Vec<EventDetail>, AppError> {
    list_details(db, None, now).await
}

/// One organizer's events, any status, with their ticket types.
pub async fn list_details_for_organizer(
    db: &PgPool,
    organizer_id: Uuid,
) -> Result<Vec<EventDetail>, AppError> {
    list_details(db, Some(organizer_id), OffsetDateTime::UNIX_EPOCH).await
}

/// The same selection as [`list`], with ticket types attached.
async fn list_details(
    db: &PgPool,
    organizer_id: Option<Uuid>,
    now: OffsetDateTime,
) -> Result<Vec<EventDetail>, AppError> {
    let events = sqlx::query_as!(
        Event,
        "SELECT id, title, description, venue, starts_at, sale_opens_at, sale_closes_at, status
         FROM events
         WHERE CASE WHEN $1::uuid IS NULL THEN status = 'published' AND starts_at > $2
                    ELSE organizer_id = $1 END
         ORDER BY starts_at, id LIMIT 500",
        organizer_id as Option<Uuid>,
        now,
    )
    .fetch_all(db)
    .await?;
    let ids: Vec<Uuid> = events.iter().map(|e| e.id).collect();
    let rows = sqlx::query!(
        "SELECT event_id, id, name, price_minor, currency, capacity, remaining, max_per_order, max_per_buyer
         FROM ticket_types WHERE event_id = ANY($1) ORDER BY position, created_at",
        &ids,
    )
    .fetch_all(db)
    .await?;
    let index: std::collections::HashMap<Uuid, usize> =
        ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let mut details: Vec<EventDetail> = events
        .into_iter()
        .map(|event| EventDetail {
            event,
            ticket_types: Vec::new(),
        })
        .collect();
    for row in rows {
        if let Some(&i) = index.get(&row.event_id) {
            details[i].ticket_types.push(TicketType {
                id: row.id,
                name: row.name,
                price_minor: row.price_minor,
                currency: row.currency,
                capacity: row.capacity,
                remaining: row.remaining,
                max_per_order: row.max_per_order,
                max_per_buyer: row.max_per_buyer,
            });
        }
    }
    Ok(details)
}
