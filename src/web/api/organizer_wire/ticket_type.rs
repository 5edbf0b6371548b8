//! A ticket type's bodies: create, update (alone or as a row of an
//! event's update), and its availability.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::number;
use crate::{
    db::events::TicketType,
    domain::{TicketTypeId, TicketTypeInput},
};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateTicketTypeRow {
    pub(super) id: TicketTypeId,
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
    pub(super) fn changes(self) -> UpdateTicketType {
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
