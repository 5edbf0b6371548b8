//! The order page: the order with its event, and its tickets.

use sqlx::PgPool;
use time::OffsetDateTime;

use crate::{
    domain::{EventId, OrderId, OrderStatus},
    error::AppError,
};

/// Everything the order page shows, in one row.
#[derive(Debug, Clone)]
pub struct OrderPage {
    pub id: OrderId,
    pub email: String,
    pub quantity: i32,
    pub status: OrderStatus,
    pub unit_price_minor: i64,
    pub currency: String,
    pub created_at: OffsetDateTime,
    pub cancelled_at: Option<OffsetDateTime>,
    pub ticket_type_name: String,
    pub event_id: EventId,
    pub event_title: String,
    pub venue: String,
    pub starts_at: OffsetDateTime,
}

/// One ticket of an order: what the door scans.
#[derive(Debug, Clone)]
pub struct Ticket {
    pub position: i32,
    pub code: String,
}

pub async fn tickets(db: &PgPool, order_id: OrderId) -> Result<Vec<Ticket>, AppError> {
    Ok(sqlx::query_as!(
        Ticket,
        "SELECT position, code FROM tickets WHERE order_id = $1 ORDER BY position",
        order_id.get()
    )
    .fetch_all(db)
    .await?)
}

pub async fn page(db: &PgPool, order_id: OrderId) -> Result<OrderPage, AppError> {
    sqlx::query_as!(
        OrderPage,
        r#"SELECT o.id, o.email, o.quantity, o.status AS "status: OrderStatus", o.unit_price_minor,
                  o.currency, o.created_at, o.cancelled_at, t.name AS ticket_type_name,
                  e.id AS event_id, e.title AS event_title, e.venue, e.starts_at
           FROM orders o
           JOIN ticket_types t ON t.id = o.ticket_type_id
           JOIN events e ON e.id = t.event_id
           WHERE o.id = $1"#,
        order_id.get(),
    )
    .fetch_optional(db)
    .await?
    .ok_or(AppError::NotFound)
}
