//! The organizer API's bodies (`/api/v1/organizer/...`), apart from the
//! rows they are built from. Requests refuse unknown fields and carry
//! plain JSON values that the handlers parse into domain types (through the
//! edit page's [`EventInput`], so the API and the page share their rules);
//! responses are plain structs: RFC 3339 times, amounts in minor units with
//! their currency.

use serde::{Deserialize, Deserializer, Serialize};
use time::{OffsetDateTime, format_description::well_known::Rfc3339};
use utoipa::ToSchema;

use crate::{
    db::{
        dashboard::{MinuteSales, Revenue, SalesTotals, TicketTypeSales},
        events::{EventDetail, TicketType},
        order_sync::SyncOrder,
    },
    domain::{
        EventId, EventInput, InvalidField, OrderCursor, OrderId, OrderStatus, SalesRange,
        TicketTypeId, TicketTypeInput, hold_minutes_text,
    },
};

/// `Some(None)` for an explicit `null` (clear it), `None` when absent.
fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

/// The edit page's input, filled from the stored event: what a partial
/// update starts from. Times in RFC 3339 and prices in minor units, so
/// nothing is rounded on the way.
pub fn input_of(detail: &EventDetail) -> EventInput {
    let event = &detail.event;
    EventInput {
        title: event.title.clone(),
        description: event.description.clone(),
        venue: event.venue.clone(),
        starts_at: rfc3339(event.starts_at),
        sale_opens_at: rfc3339(event.sale_opens_at),
        sale_closes_at: event.sale_closes_at.map(rfc3339).unwrap_or_default(),
        // An edit leaves the status alone (publish and unpublish set it).
        status: String::new(),
        max_per_buyer: number(event.max_per_buyer.map(i64::from)),
        hold_minutes: hold_minutes_text(event.hold_seconds),
        ticket_types: detail
            .ticket_types
            .iter()
            .map(|tt| TicketTypeInput {
                id: Some(tt.id),
                name: tt.name.clone(),
                price: tt.price_minor.to_string(),
                price_is_minor: true,
                currency: tt.currency.clone(),
                capacity: tt.capacity.to_string(),
                max_per_order: tt.max_per_order.to_string(),
                max_per_buyer: tt.max_per_buyer.to_string(),
                hidden: tt.hidden,
            })
            .collect(),
    }
}

fn number(n: Option<i64>) -> String {
    n.map(|n| n.to_string()).unwrap_or_default()
}

/// `PATCH /api/v1/organizer/events/{id}`: the fields to change; absent ones
/// stay. `status` is not here: publish, unpublish and cancel are their own
/// operations. New ticket types are `POST .../ticket-types`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateEvent {
    #[serde(default)]
    #[schema(min_length = 1, max_length = 200)]
    title: Option<String>,
    #[serde(default)]
    #[schema(max_length = 10000)]
    description: Option<String>,
    #[serde(default)]
    #[schema(min_length = 1, max_length = 200)]
    venue: Option<String>,
    #[serde(default)]
    #[schema(format = DateTime)]
    starts_at: Option<String>,
    #[serde(default)]
    #[schema(format = DateTime)]
    sale_opens_at: Option<String>,
    /// `null`: the sale closes when the event starts.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>, format = DateTime)]
    sale_closes_at: Option<Option<String>>,
    /// `null`: no limit per buyer across the ticket types.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<i64>)]
    #[schema(minimum = 1, maximum = 10_000)]
    max_per_buyer: Option<Option<i64>>,
    /// `null`: orders are confirmed at once; minutes: each order is held
    /// this long for its buyer to confirm from their mailbox.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<i64>)]
    #[schema(minimum = 1, maximum = 120)]
    hold_minutes: Option<Option<i64>>,
    /// Changes to existing ticket types, each named by its `id`.
    #[serde(default)]
    #[schema(max_items = 20)]
    ticket_types: Vec<UpdateTicketTypeRow>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateTicketTypeRow {
    id: TicketTypeId,
    #[serde(default)]
    #[schema(min_length = 1, max_length = 100)]
    name: Option<String>,
    #[serde(default)]
    #[schema(minimum = 0, maximum = 100_000_000)]
    price_minor: Option<i64>,
    #[serde(default)]
    /// A three-letter code, any case; empty means EUR.
    #[schema(pattern = "^\\s*([A-Za-z]{3})?\\s*$", example = "EUR")]
    currency: Option<String>,
    #[serde(default)]
    #[schema(minimum = 0, maximum = 1_000_000)]
    capacity: Option<i64>,
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100)]
    max_per_order: Option<i64>,
    #[serde(default)]
    #[schema(minimum = 1, maximum = 10_000)]
    max_per_buyer: Option<i64>,
    /// Shown and sold only with a presale code that unlocks it.
    #[serde(default)]
    hidden: Option<bool>,
}

impl UpdateTicketTypeRow {
    fn changes(self) -> UpdateTicketType {
        UpdateTicketType {
            name: self.name,
            price_minor: self.price_minor,
            currency: self.currency,
            capacity: self.capacity,
            max_per_order: self.max_per_order,
            max_per_buyer: self.max_per_buyer,
            hidden: self.hidden,
        }
    }
}

/// `PATCH .../ticket-types/{id}` (and a row of an event's update): the
/// fields to change. A new capacity adds its difference to what is left;
/// below what is sold, it is refused.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateTicketType {
    #[serde(default)]
    #[schema(min_length = 1, max_length = 100)]
    name: Option<String>,
    #[serde(default)]
    #[schema(minimum = 0, maximum = 100_000_000)]
    price_minor: Option<i64>,
    #[serde(default)]
    /// A three-letter code, any case; empty means EUR.
    #[schema(pattern = "^\\s*([A-Za-z]{3})?\\s*$", example = "EUR")]
    currency: Option<String>,
    #[serde(default)]
    #[schema(minimum = 0, maximum = 1_000_000)]
    capacity: Option<i64>,
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100)]
    max_per_order: Option<i64>,
    #[serde(default)]
    #[schema(minimum = 1, maximum = 10_000)]
    max_per_buyer: Option<i64>,
    /// Shown and sold only with a presale code that unlocks it.
    #[serde(default)]
    hidden: Option<bool>,
}

impl UpdateTicketType {
    pub fn apply(self, row: &mut TicketTypeInput) {
        if let Some(name) = self.name {
            row.name = name;
        }
        if let Some(price) = self.price_minor {
            row.price = price.to_string();
        }
        if let Some(currency) = self.currency {
            row.currency = currency;
        }
        if let Some(capacity) = self.capacity {
            row.capacity = capacity.to_string();
        }
        if let Some(n) = self.max_per_order {
            row.max_per_order = n.to_string();
        }
        if let Some(n) = self.max_per_buyer {
            row.max_per_buyer = n.to_string();
        }
        if let Some(hidden) = self.hidden {
            row.hidden = hidden;
        }
    }
}

impl UpdateEvent {
    /// The changes applied to `input`; for each row of the request, the
    /// index of the event's ticket type it changes (for error fields).
    pub fn apply(self, input: &mut EventInput) -> Result<Vec<usize>, InvalidField> {
        let set = |target: &mut String, value: Option<String>| {
            if let Some(value) = value {
                *target = value;
            }
        };
        set(&mut input.title, self.title);
        set(&mut input.description, self.description);
        set(&mut input.venue, self.venue);
        set(&mut input.starts_at, self.starts_at);
        set(&mut input.sale_opens_at, self.sale_opens_at);
        set(
            &mut input.sale_closes_at,
            self.sale_closes_at.map(Option::unwrap_or_default),
        );
        set(&mut input.max_per_buyer, self.max_per_buyer.map(number));
        set(&mut input.hold_minutes, self.hold_minutes.map(number));
        let mut rows = Vec::with_capacity(self.ticket_types.len());
        for (i, row) in self.ticket_types.into_iter().enumerate() {
            let index = input
                .ticket_types
                .iter()
                .position(|tt| tt.id == Some(row.id))
                .ok_or_else(|| {
                    InvalidField::new(
                        format!("ticket_types[{i}].id"),
                        "This is not a ticket type of this event.",
                    )
                })?;
            if rows.contains(&index) {
                return Err(InvalidField::new(
                    format!("ticket_types[{i}].id"),
                    "This ticket type is named twice.",
                ));
            }
            row.changes().apply(&mut input.ticket_types[index]);
            rows.push(index);
        }
        Ok(rows)
    }
}

/// `POST .../ticket-types`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTicketType {
    #[schema(min_length = 1, max_length = 100)]
    name: String,
    #[schema(minimum = 0, maximum = 100_000_000)]
    price_minor: i64,
    /// A three-letter code, any case; empty means EUR.
    #[schema(pattern = "^\\s*([A-Za-z]{3})?\\s*$", example = "EUR")]
    currency: String,
    #[schema(minimum = 0, maximum = 1_000_000)]
    capacity: i64,
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100)]
    max_per_order: Option<i64>,
    #[serde(default)]
    #[schema(minimum = 1, maximum = 10_000)]
    max_per_buyer: Option<i64>,
    /// Shown and sold only with a presale code that unlocks it.
    #[serde(default)]
    hidden: Option<bool>,
}

impl CreateTicketType {
    pub fn into_input(self) -> TicketTypeInput {
        TicketTypeInput {
            id: None,
            name: self.name,
            price: self.price_minor.to_string(),
            price_is_minor: true,
            currency: self.currency,
            capacity: self.capacity.to_string(),
            max_per_order: number(self.max_per_order),
            max_per_buyer: number(self.max_per_buyer),
            hidden: self.hidden.unwrap_or(false),
        }
    }
}

/// An event as its organizer sees it, each ticket type with its live
/// availability.
#[derive(Debug, Serialize, ToSchema)]
pub struct OrganizerEventBody {
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
    #[schema(value_type = super::wire::EventStatusName)]
    status: &'static str,
    max_per_buyer: Option<i32>,
    ticket_types: Vec<TicketTypeAvailability>,
}

impl From<EventDetail> for OrganizerEventBody {
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
            status: event.status.as_str(),
            max_per_buyer: event.max_per_buyer,
            ticket_types: detail.ticket_types.into_iter().map(Into::into).collect(),
        }
    }
}

/// A ticket type with what is sold and left, read from its row.
#[derive(Debug, Serialize, ToSchema)]
pub struct TicketTypeAvailability {
    id: TicketTypeId,
    name: String,
    price_minor: i64,
    currency: String,
    max_per_order: i32,
    max_per_buyer: i32,
    capacity: i32,
    sold: i32,
    remaining: i32,
    /// Sales stopped for good (the event is cancelled).
    halted: bool,
    /// Of `sold`, the tickets in held orders not confirmed yet.
    held: i64,
    /// Shown and sold only with a presale code that unlocks it.
    hidden: bool,
}

impl From<TicketType> for TicketTypeAvailability {
    fn from(tt: TicketType) -> Self {
        Self {
            id: tt.id,
            name: tt.name,
            price_minor: tt.price_minor,
            currency: tt.currency,
            max_per_order: tt.max_per_order,
            max_per_buyer: tt.max_per_buyer,
            capacity: tt.capacity,
            sold: tt.capacity - tt.remaining,
            remaining: tt.remaining,
            halted: tt.sales_halted,
            held: tt.held,
            hidden: tt.hidden,
        }
    }
}

/// `{"ticket_types": [...], "next": null}`: an event has at most 20 ticket
/// types, so the list is always one page.
#[derive(Debug, Serialize, ToSchema)]
pub struct TicketTypeList {
    ticket_types: Vec<TicketTypeAvailability>,
    next: Option<String>,
}

impl From<Vec<TicketType>> for TicketTypeList {
    fn from(ticket_types: Vec<TicketType>) -> Self {
        Self {
            ticket_types: ticket_types.into_iter().map(Into::into).collect(),
            next: None,
        }
    }
}

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

#[derive(Debug, Serialize, ToSchema)]
pub struct MoneyBody {
    currency: String,
    amount_minor: i64,
}

impl From<Revenue> for MoneyBody {
    fn from(revenue: Revenue) -> Self {
        Self {
            currency: revenue.currency,
            amount_minor: revenue.minor,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TicketTypeStats {
    id: TicketTypeId,
    name: String,
    capacity: i32,
    sold: i64,
    remaining: i32,
    /// One entry per currency sold in, at each order's own price.
    revenue: Vec<MoneyBody>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TotalStats {
    capacity: i64,
    sold: i64,
    remaining: i64,
    revenue: Vec<MoneyBody>,
}

/// `GET .../stats`: the dashboard's sales table.
#[derive(Debug, Serialize, ToSchema)]
pub struct StatsBody {
    event_id: EventId,
    ticket_types: Vec<TicketTypeStats>,
    totals: TotalStats,
}

impl StatsBody {
    pub fn new(event_id: EventId, sales: Vec<TicketTypeSales>, totals: SalesTotals) -> Self {
        Self {
            event_id,
            ticket_types: sales
                .into_iter()
                .map(|tt| TicketTypeStats {
                    id: tt.id,
                    name: tt.name,
                    capacity: tt.capacity,
                    sold: tt.sold,
                    remaining: tt.remaining,
                    revenue: tt.revenue.into_iter().map(Into::into).collect(),
                })
                .collect(),
            totals: TotalStats {
                capacity: totals.capacity,
                sold: totals.sold,
                remaining: totals.remaining,
                revenue: totals.revenue.into_iter().map(Into::into).collect(),
            },
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MinuteBody {
    #[serde(with = "time::serde::rfc3339")]
    at: OffsetDateTime,
    tickets: i64,
}

/// `GET .../stats/sales`: tickets sold per minute, every minute of the range.
#[derive(Debug, Serialize, ToSchema)]
pub struct SalesSeriesBody {
    event_id: EventId,
    #[serde(with = "time::serde::rfc3339")]
    from: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    to: OffsetDateTime,
    minutes: Vec<MinuteBody>,
}

impl SalesSeriesBody {
    pub fn new(event_id: EventId, range: SalesRange, minutes: Vec<MinuteSales>) -> Self {
        Self {
            event_id,
            from: range.from,
            to: range.to,
            minutes: minutes
                .into_iter()
                .map(|m| MinuteBody {
                    at: m.at,
                    tickets: m.tickets,
                })
                .collect(),
        }
    }
}
