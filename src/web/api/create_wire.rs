//! The body that creates an event (`POST /api/v1/organizer/events`), read
//! into the same [`EventInput`] as the organizer form.

use serde::Deserialize;
use utoipa::ToSchema;

use crate::domain::{EventInput, TicketTypeInput};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "title": "Night of the Stampede",
    "venue": "Hall 1",
    "starts_at": "2030-05-01T19:30:00Z",
    "sale_opens_at": "2030-04-01T10:00:00Z",
    "status": "draft",
    "ticket_types": [
        {"name": "Standing", "price_minor": 2500, "currency": "EUR", "capacity": 500, "max_per_order": 4}
    ]
}))]
pub struct CreateEvent {
    #[schema(min_length = 1, max_length = 200)]
    title: String,
    #[serde(default)]
    #[schema(max_length = 10000)]
    description: String,
    #[schema(min_length = 1, max_length = 200)]
    venue: String,
    #[schema(format = DateTime)]
    starts_at: String,
    #[schema(format = DateTime)]
    sale_opens_at: String,
    #[serde(default)]
    #[schema(format = DateTime)]
    sale_closes_at: Option<String>,
    /// `draft` (the default) or `published`.
    #[serde(default)]
    #[schema(pattern = "^\\s*(draft|published)?\\s*$")]
    status: Option<String>,
    /// Per buyer across all ticket types; absent or null for no limit.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 10_000)]
    max_per_buyer: Option<i64>,
    /// Minutes each order is held for its buyer to confirm from their
    /// mailbox; absent or null: orders are confirmed at once.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 120)]
    hold_minutes: Option<i64>,
    /// Minutes a buyer of a priced ticket has to pay; absent or null: 15.
    #[serde(default)]
    #[schema(minimum = 2, maximum = 120)]
    pay_minutes: Option<i64>,
    /// Who takes the money for priced tickets: `stripe` (default; orders
    /// held until paid) or `offline` (the organizer, outside Stampede).
    #[serde(default)]
    payment: Option<String>,
    /// The event's IANA time zone, e.g. `Europe/Berlin`; absent: the
    /// deployment's (`--time-zone`). Its pages and mails show local times
    /// in it, and times sent without an offset are read in it.
    #[serde(default)]
    #[schema(example = "Europe/Berlin")]
    time_zone: Option<String>,
    #[schema(min_items = 1, max_items = 20)]
    ticket_types: Vec<CreateTicketType>,
}

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
    hidden: bool,
}

impl CreateEvent {
    pub fn into_input(self) -> EventInput {
        let number = |n: Option<i64>| n.map(|n| n.to_string()).unwrap_or_default();
        EventInput {
            title: self.title,
            description: self.description,
            venue: self.venue,
            starts_at: self.starts_at,
            sale_opens_at: self.sale_opens_at,
            sale_closes_at: self.sale_closes_at.unwrap_or_default(),
            status: self.status.unwrap_or_default(),
            max_per_buyer: number(self.max_per_buyer),
            hold_minutes: number(self.hold_minutes),
            pay_minutes: number(self.pay_minutes),
            payment: self.payment.unwrap_or_default(),
            time_zone: self.time_zone.unwrap_or_default(),
            ticket_types: self
                .ticket_types
                .into_iter()
                .map(|tt| TicketTypeInput {
                    id: None,
                    name: tt.name,
                    price: tt.price_minor.to_string(),
                    price_is_minor: true,
                    currency: tt.currency,
                    capacity: tt.capacity.to_string(),
                    max_per_order: number(tt.max_per_order),
                    max_per_buyer: number(tt.max_per_buyer),
                    hidden: tt.hidden,
                })
                .collect(),
        }
    }
}
