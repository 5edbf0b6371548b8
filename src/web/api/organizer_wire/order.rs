//! An order as its organizer sees it, and a page of them.

use serde::Serialize;
use time::OffsetDateTime;
use utoipa::ToSchema;

use crate::{
    db::order_sync::SyncOrder,
    domain::{EventId, OrderCursor, OrderId, OrderStatus, TicketTypeId},
};

#[derive(Debug, Serialize, ToSchema)]
pub struct OrganizerOrderBody {
    id: OrderId,
    event_id: EventId,
    ticket_type_id: TicketTypeId,
    email: String,
    quantity: i32,
    status: OrderStatus,
    unit_price_minor: i64,
    total_minor: i64,
    currency: String,
    #[serde(with = "time::serde::rfc3339")]
    created_at: OffsetDateTime,
    /// The last change (the purchase or the cancellation): what
    /// `modified_since` compares.
    #[serde(with = "time::serde::rfc3339")]
    updated_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    cancelled_at: Option<OffsetDateTime>,
}

impl From<SyncOrder> for OrganizerOrderBody {
    fn from(order: SyncOrder) -> Self {
        Self {
            id: order.id,
            event_id: order.event_id,
            ticket_type_id: order.ticket_type_id,
            email: order.email,
            quantity: order.quantity,
            status: order.status,
            unit_price_minor: order.unit_price_minor,
            total_minor: order.unit_price_minor * i64::from(order.quantity),
            currency: order.currency,
            created_at: order.created_at,
            updated_at: order.updated_at,
            cancelled_at: order.cancelled_at,
        }
    }
}

/// `{"orders": [...], "next": "cursor" | null}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct OrderPageBody {
    orders: Vec<OrganizerOrderBody>,
    next: Option<String>,
}

impl OrderPageBody {
    pub fn new(orders: Vec<SyncOrder>, next: Option<OrderCursor>) -> Self {
        Self {
            orders: orders.into_iter().map(Into::into).collect(),
            next: next.map(|cursor| cursor.encode()),
        }
    }
}
