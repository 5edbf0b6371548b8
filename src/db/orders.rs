//! The order page: the order's event and its tickets, these only to a
//! visitor with a proof (the order row itself is read by the sale path,
//! `src/sale/`, which owns that table).

use sqlx::PgPool;
use time::OffsetDateTime;

use crate::{
    domain::{EventId, OrderId, Zone},
    error::AppError,
};

/// What the order page shows around the order row (read by the sale path):
/// its ticket type and event, and when it was cancelled.
#[derive(Debug, Clone)]
pub struct OrderContext {
    pub cancelled_at: Option<OffsetDateTime>,
    pub ticket_type_name: String,
    pub event_id: EventId,
    pub event_title: String,
    pub venue: String,
    pub starts_at: OffsetDateTime,
    /// The event's: the page's times are local times in it.
    pub zone: Zone,
}

/// One ticket of an order: what the door scans.
#[derive(Debug, Clone)]
pub struct Ticket {
    pub position: i32,
    pub code: String,
}

/// What proves a visitor may see an order's codes: the hash of the cancel
/// secret or of the confirmation token they came with, or a mailed token
/// that the app's key derives for this order (`web::extract::order_proof`).
#[derive(Debug, Clone, Default)]
pub struct Proof {
    pub secret_hash: Option<Vec<u8>>,
    pub token_hash: Option<Vec<u8>>,
    pub mailed: bool,
}

/// The order's tickets, when `proof` matches the order (none otherwise).
pub async fn tickets(
    db: &PgPool,
    order_id: OrderId,
    proof: &Proof,
) -> Result<Vec<Ticket>, AppError> {
    if proof.secret_hash.is_none() && proof.token_hash.is_none() && !proof.mailed {
        return Ok(Vec::new());
    }
    Ok(sqlx::query_as!(
        Ticket,
        "SELECT t.position, t.code FROM tickets t JOIN orders o ON o.id = t.order_id
         WHERE t.order_id = $1
           AND ($4 OR o.cancel_secret_hash = $2 OR o.confirm_token_hash = $3)
         ORDER BY t.position",
        order_id.get(),
        proof.secret_hash.as_deref(),
        proof.token_hash.as_deref(),
        proof.mailed,
    )
    .fetch_all(db)
    .await?)
}

pub async fn context(db: &PgPool, order_id: OrderId) -> Result<OrderContext, AppError> {
    sqlx::query_as!(
        OrderContext,
        r#"SELECT o.cancelled_at, t.name AS ticket_type_name,
                  e.id AS event_id, e.title AS event_title, e.venue, e.starts_at,
                  e.time_zone AS "zone: Zone"
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
