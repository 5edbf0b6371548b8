//! The JSON API's bodies, apart from the rows they are built from: what
//! clients send (parsed into domain types by the handlers) and what they get.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;

use crate::{
    db::events::{EventDetail, TicketType},
    domain::{CancelSecret, EventCursor, EventId, OrderId, OrderStatus, TicketTypeId},
    sale::Order,
    web::list_cache::EventPage,
};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateOrder {
    pub ticket_type_id: TicketTypeId,
    #[schema(minimum = 1, maximum = 100)]
    pub quantity: i64,
    #[schema(format = Email, max_length = 254)]
    pub email: String,
    #[schema(
        pattern = "^[A-Za-z0-9_-]{16,200}$",
        example = "3b0f0c7e-6a52-4d8e-9d44-2f8f0f1b9c11"
    )]
    pub idempotency_key: String,
    /// The waiting room's pass, for an event that has one.
    #[serde(default)]
    pub pass: Option<String>,
    /// A presale code: needed for a hidden ticket type; its uses (tickets)
    /// are counted.
    #[serde(default)]
    #[schema(pattern = "^\\s*[A-Za-z0-9-]{4,40}\\s*$", example = "FANCLUB-2027")]
    pub presale_code: Option<String>,
}

/// An event with its ticket types.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventBody {
    id: EventId,
    title: String,
    description: String,
    venue: String,
    #[serde(with = "time::serde::rfc3339")]
    starts_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    sale_opens_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    sale_closes_at: Option<OffsetDateTime>,
    /// The IANA zone the event's times are shown in (the instants above
    /// are exact, whatever their offset).
    #[schema(example = "Europe/Berlin")]
    time_zone: String,
    #[schema(value_type = EventStatusName)]
    status: &'static str,
    max_per_buyer: Option<i32>,
    /// Minutes orders are held for their buyers' confirmation by mail;
    /// null: confirmed at once.
    hold_minutes: Option<i64>,
    /// Minutes a buyer of a priced ticket has to pay; `payment`: `stripe`
    /// or `offline`.
    pay_minutes: i64,
    payment: String,
    ticket_types: Vec<TicketTypeBody>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TicketTypeBody {
    /// Absent for an event behind a waiting room (see `hide_ticket_type_ids`).
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<TicketTypeId>,
    name: String,
    price_minor: i64,
    currency: String,
    capacity: i32,
    remaining: i32,
    /// Tickets in held orders: not for sale now, but they come back if
    /// their buyers do not confirm in time.
    held: i64,
    max_per_order: i32,
    max_per_buyer: i32,
}

impl EventBody {
    /// A queued event's ticket type ids are for admitted buyers only: the
    /// sale opens to the queue, not to scripts that know the ids.
    pub fn hide_ticket_type_ids(&mut self) {
        for tt in &mut self.ticket_types {
            tt.id = None;
        }
    }
}

impl EventPageBody {
    /// [`EventBody::hide_ticket_type_ids`] for the listed events that `queued` names.
    pub fn hide_ticket_type_ids(&mut self, queued: &[EventId]) {
        for event in &mut self.events {
            if queued.contains(&event.id) {
                for tt in &mut event.ticket_types {
                    tt.id = None;
                }
            }
        }
    }

    pub fn event_ids(&self) -> Vec<EventId> {
        self.events.iter().map(|e| e.id).collect()
    }
}

impl From<EventDetail> for EventBody {
    fn from(detail: EventDetail) -> Self {
        let event = detail.event;
        Self {
            id: event.id,
            title: event.title,
            description: event.description,
            venue: event.venue,
            starts_at: event.starts_at,
            sale_opens_at: event.sale_opens_at,
            sale_closes_at: event.sale_closes_at,
            time_zone: event.zone.name().to_owned(),
            status: event.status.as_str(),
            max_per_buyer: event.max_per_buyer,
            hold_minutes: event
                .hold_seconds
                .map(|s| (i64::from(s) + 59).div_euclid(60)),
            pay_minutes: (i64::from(event.pay_seconds) + 59).div_euclid(60),
            payment: crate::domain::payment_text(event.takes_payment),
            ticket_types: detail.ticket_types.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<TicketType> for TicketTypeBody {
    fn from(tt: TicketType) -> Self {
        Self {
            id: Some(tt.id),
            name: tt.name,
            price_minor: tt.price_minor,
            currency: tt.currency,
            capacity: tt.capacity,
            remaining: tt.remaining,
            held: tt.held,
            max_per_order: tt.max_per_order,
            max_per_buyer: tt.max_per_buyer,
        }
    }
}

/// An event in a list: no description (lists stay small however long
/// descriptions are; `GET /api/v1/events/{id}` has it).
#[derive(Debug, Serialize, ToSchema)]
pub struct EventSummary {
    id: EventId,
    title: String,
    venue: String,
    #[serde(with = "time::serde::rfc3339")]
    starts_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    sale_opens_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    sale_closes_at: Option<OffsetDateTime>,
    time_zone: String,
    #[schema(value_type = EventStatusName)]
    status: &'static str,
    max_per_buyer: Option<i32>,
    ticket_types: Vec<TicketTypeBody>,
}

impl From<&EventDetail> for EventSummary {
    fn from(detail: &EventDetail) -> Self {
        let event = &detail.event;
        Self {
            id: event.id,
            title: event.title.clone(),
            venue: event.venue.clone(),
            starts_at: event.starts_at,
            sale_opens_at: event.sale_opens_at,
            sale_closes_at: event.sale_closes_at,
            time_zone: event.zone.name().to_owned(),
            status: event.status.as_str(),
            max_per_buyer: event.max_per_buyer,
            ticket_types: detail
                .ticket_types
                .iter()
                .cloned()
                .map(Into::into)
                .collect(),
        }
    }
}

/// `{"events": [...], "next": "cursor" | null}`: one page of the public list.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventPageBody {
    events: Vec<EventSummary>,
    next: Option<String>,
}

impl From<&EventPage> for EventPageBody {
    fn from(page: &EventPage) -> Self {
        Self {
            events: page.events.iter().map(Into::into).collect(),
            next: page.next.map(|cursor| cursor.encode()),
        }
    }
}

/// `{"events": [...], "next": "cursor" | null}`: a page of the organizer's own.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventList {
    events: Vec<EventBody>,
    next: Option<String>,
}

impl EventList {
    pub fn new(details: Vec<EventDetail>, next: Option<EventCursor>) -> Self {
        Self {
            events: details.into_iter().map(Into::into).collect(),
            next: next.map(|cursor| cursor.encode()),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct OrderBody {
    id: OrderId,
    ticket_type_id: TicketTypeId,
    email: String,
    quantity: i32,
    status: OrderStatus,
    unit_price_minor: i64,
    currency: String,
    #[serde(with = "time::serde::rfc3339")]
    created_at: OffsetDateTime,
    /// For an order of an event that holds its orders: the buyer confirms
    /// from the mailed link before this, or it expires (status `expired`).
    #[serde(
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    hold_expires_at: Option<OffsetDateTime>,
    /// Only on the answer that created the order: the secret that cancels it.
    #[serde(skip_serializing_if = "Option::is_none")]
    cancel_secret: Option<String>,
    /// The order page that can cancel (`/orders/{id}?s=...`), with the secret.
    #[serde(skip_serializing_if = "Option::is_none")]
    cancel_url: Option<String>,
    /// Only on the answer that created a held priced order: its pay page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pay_url: Option<String>,
}

impl OrderBody {
    pub fn with_secret(mut self, secret: &CancelSecret) -> Self {
        self.cancel_secret = Some(secret.as_str().to_owned());
        self.cancel_url = Some(crate::web::pages::order_url(self.id, Some(secret)));
        let priced_hold = self.status == OrderStatus::Held && self.unit_price_minor > 0;
        self.pay_url =
            priced_hold.then(|| format!("/orders/{}/pay?s={}", self.id, secret.as_str()));
        self
    }
}

impl From<Order> for OrderBody {
    fn from(order: Order) -> Self {
        Self {
            id: order.id,
            ticket_type_id: order.ticket_type_id,
            email: order.email,
            quantity: order.quantity,
            status: order.status,
            unit_price_minor: order.unit_price_minor,
            currency: order.currency,
            created_at: order.created_at,
            hold_expires_at: order.hold_expires_at,
            cancel_secret: None,
            cancel_url: None,
            pay_url: None,
        }
    }
}

/// An event's status, as the API reports it.
#[derive(serde::Serialize, ToSchema)]
#[schema(as = EventStatus)]
#[allow(dead_code)] // documents a `&'static str` field
#[serde(rename_all = "lowercase")]
pub enum EventStatusName {
    Draft,
    Published,
    Cancelled,
}
