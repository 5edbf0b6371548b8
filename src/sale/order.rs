//! The order row, as the sale path and the API see it, and its one read.

use sqlx::PgPool;
use time::OffsetDateTime;

use crate::{
    domain::{Email, IdempotencyKey, OrderId, OrderStatus, TicketTypeId},
    error::AppError,
};

/// An order row, as the sale path and the API see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    pub id: OrderId,
    pub ticket_type_id: TicketTypeId,
    pub email: String,
    pub quantity: i32,
    pub status: OrderStatus,
    pub unit_price_minor: i64,
    pub currency: String,
    pub created_at: OffsetDateTime,
    /// A held order's deadline for its confirmation (kept after it ends).
    pub hold_expires_at: Option<OffsetDateTime>,
}

/// How to find one order: by its id, or by its buyer and idempotency key.
#[derive(Debug, Clone, Copy)]
pub enum OrderRef<'a> {
    Id(OrderId),
    Key(&'a Email, &'a IdempotencyKey),
}

/// The one read of an order row.
pub async fn find(db: &PgPool, by: OrderRef<'_>) -> Result<Option<Order>, AppError> {
    let (id, email, key) = match by {
        OrderRef::Id(id) => (Some(id.get()), None, None),
        OrderRef::Key(email, key) => (None, Some(email.as_str()), Some(key.as_str())),
    };
    Ok(
        sqlx::query_file_as!(Order, "sql/sale/find_order.sql", id, email, key,)
            .fetch_optional(db)
            .await?,
    )
}

pub async fn find_by_id(db: &PgPool, order_id: OrderId) -> Result<Option<Order>, AppError> {
    find(db, OrderRef::Id(order_id)).await
}
