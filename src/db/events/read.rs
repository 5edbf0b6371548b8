//! Reading events with their ticket types: one, or a page of a list.

use std::collections::HashMap;

use sqlx::PgPool;
use time::OffsetDateTime;

use super::{Event, EventDetail, TicketType};
use crate::{
    domain::{
        EVENTS_PER_PAGE, EventCursor, EventId, EventListQuery, EventStatus, OrganizerId, Zone,
    },
    error::AppError,
};

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

/// The zone of an event of this organizer's, that its forms' local times
/// are read in; any other organizer's is "not found".
pub async fn zone_owned(
    db: &PgPool,
    organizer_id: OrganizerId,
    event_id: EventId,
) -> Result<Zone, AppError> {
    sqlx::query_scalar!(
        r#"SELECT time_zone AS "zone: Zone" FROM events WHERE id = $1 AND organizer_id = $2"#,
        event_id.get(),
        organizer_id.get(),
    )
    .fetch_optional(db)
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
                  status AS "status: EventStatus", max_per_buyer, hold_seconds, pay_seconds,
                  payment = 'stripe' AS "takes_payment!", time_zone AS "zone: Zone"
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
                  status AS "status: EventStatus", max_per_buyer, hold_seconds, pay_seconds,
                  payment = 'stripe' AS "takes_payment!", time_zone AS "zone: Zone"
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
                  status AS "status: EventStatus", max_per_buyer, hold_seconds, pay_seconds,
                  payment = 'stripe' AS "takes_payment!", time_zone AS "zone: Zone"
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
                  status AS "status: EventStatus", max_per_buyer, hold_seconds, pay_seconds,
                  payment = 'stripe' AS "takes_payment!", time_zone AS "zone: Zone"
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
