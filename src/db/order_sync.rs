//! The organizer API's view of orders: one event's orders a page at a time
//! for incremental sync (keyset on `(updated_at, id)`, `updated_at` kept by
//! a trigger on every change, migrations/0010), and one order. Every query
//! joins `events` on the organizer, so another organizer's order is never
//! returned.

use sqlx::PgPool;
use time::OffsetDateTime;

use crate::{
    domain::{
        EventId, OrderCursor, OrderId, OrderQuery, OrderStatus, OrganizerId, TicketTypeId,
        contains_pattern,
    },
    error::AppError,
};

#[derive(Debug, Clone)]
pub struct SyncOrder {
    pub id: OrderId,
    pub event_id: EventId,
    pub ticket_type_id: TicketTypeId,
    pub email: String,
    pub quantity: i32,
    pub status: OrderStatus,
    pub unit_price_minor: i64,
    pub currency: String,
    pub created_at: OffsetDateTime,
    /// The last change: the purchase, or the cancellation.
    pub updated_at: OffsetDateTime,
    pub cancelled_at: Option<OffsetDateTime>,
}

/// One page of the event's orders matching `query`, oldest change first,
/// and the cursor of the next page if there is one.
pub async fn page(
    db: &PgPool,
    organizer_id: OrganizerId,
    event_id: EventId,
    query: &OrderQuery,
) -> Result<(Vec<SyncOrder>, Option<OrderCursor>), AppError> {
    let pattern = contains_pattern(&query.email);
    let (after_at, after_id) = query.after.map(|c| (c.updated_at, c.id.get())).unzip();
    // The email column compares bytewise (migrations/0007): the search folds
    // case under the database's collation, as the dashboard's does.
    let mut rows = sqlx::query_as!(
        SyncOrder,
        r#"SELECT o.id, t.event_id, o.ticket_type_id, o.email, o.quantity,
                  o.status AS "status: OrderStatus", o.unit_price_minor, o.currency,
                  o.created_at, o.updated_at, o.cancelled_at
           FROM orders o
           JOIN ticket_types t ON t.id = o.ticket_type_id
           JOIN events e ON e.id = t.event_id
           WHERE t.event_id = $1 AND e.organizer_id = $2
             AND ($3::timestamptz IS NULL OR o.updated_at >= $3)
             AND ($4::text IS NULL OR o.status = $4)
             AND ($5::text IS NULL OR o.email COLLATE "default" ILIKE $5 ESCAPE '\')
             AND ($6::timestamptz IS NULL OR (o.updated_at, o.id) > ($6, $7::uuid))
           ORDER BY o.updated_at, o.id
           LIMIT $8"#,
        event_id.get(),
        organizer_id.get(),
        query.modified_since,
        query.status.map(OrderStatus::as_str),
        pattern.as_deref(),
        after_at,
        after_id,
        query.limit + 1,
    )
    .fetch_all(db)
    .await?;
    let next = if rows.len() as i64 > query.limit {
        rows.truncate(query.limit as usize);
        rows.last().map(|o| OrderCursor {
            updated_at: o.updated_at,
            id: o.id,
        })
    } else {
        None
    };
    Ok((rows, next))
}

/// One order of an event of this organizer's.
pub async fn find_owned(
    db: &PgPool,
    organizer_id: OrganizerId,
    order_id: OrderId,
) -> Result<SyncOrder, AppError> {
    sqlx::query_as!(
        SyncOrder,
        r#"SELECT o.id, t.event_id, o.ticket_type_id, o.email, o.quantity,
                  o.status AS "status: OrderStatus", o.unit_price_minor, o.currency,
                  o.created_at, o.updated_at, o.cancelled_at
           FROM orders o
           JOIN ticket_types t ON t.id = o.ticket_type_id
           JOIN events e ON e.id = t.event_id
           WHERE o.id = $1 AND e.organizer_id = $2"#,
        order_id.get(),
        organizer_id.get(),
    )
    .fetch_optional(db)
    .await?
    .ok_or(AppError::NotFound)
}
