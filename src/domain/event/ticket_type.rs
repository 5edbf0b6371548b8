//! A ticket type as typed or sent, and as checked: its name, price,
//! capacity and limits per order and per buyer.

use super::fields::{text, whole};
use crate::domain::{Currency, ForField, InvalidField, MAX_QUANTITY, Money, TicketTypeId};

pub const MAX_CAPACITY: i64 = 1_000_000;
pub const MAX_PER_BUYER: i64 = 10_000;
const DEFAULT_MAX_PER_ORDER: i64 = 10;

#[derive(Debug, Clone, Default)]
pub struct TicketTypeInput {
    /// Set when editing an existing ticket type.
    pub id: Option<TicketTypeId>,
    pub name: String,
    /// Decimal ("12.50") from forms; minor units from the API.
    pub price: String,
    pub price_is_minor: bool,
    pub currency: String,
    pub capacity: String,
    pub max_per_order: String,
    pub max_per_buyer: String,
    /// Only with a presale code (see `domain::PresaleCode`).
    pub hidden: bool,
}

impl TicketTypeInput {
    /// A blank row of the organizer form, which is ignored.
    pub fn is_blank(&self) -> bool {
        self.id.is_none()
            && [&self.name, &self.price, &self.capacity]
                .iter()
                .all(|s| s.trim().is_empty())
    }
}

#[derive(Debug, Clone)]
pub struct NewTicketType {
    /// The row of the input it came from, for error messages.
    pub row: usize,
    pub id: Option<TicketTypeId>,
    pub name: String,
    pub price: Money,
    pub capacity: i32,
    pub max_per_order: i32,
    pub max_per_buyer: i32,
    /// Shown and sold only with a presale code that unlocks it.
    pub hidden: bool,
}

impl TicketTypeInput {
    pub(super) fn parse(&self, index: usize) -> Result<NewTicketType, InvalidField> {
        let field = |name: &str| format!("ticket_types[{index}].{name}");
        let name = text(&self.name, 100).for_field(&field("name"))?;
        let currency_raw = if self.currency.trim().is_empty() {
            "EUR"
        } else {
            &self.currency
        };
        let currency = Currency::parse(currency_raw).for_field(&field("currency"))?;
        let price = if self.price_is_minor {
            whole(&self.price, 0, i64::MAX)
                .and_then(|minor| Money::from_minor(minor, currency))
                .for_field(&field("price_minor"))?
        } else {
            Money::parse_decimal(&self.price, currency).for_field(&field("price"))?
        };
        let capacity = whole(&self.capacity, 0, MAX_CAPACITY).for_field(&field("capacity"))?;
        let max_per_order = match self.max_per_order.trim() {
            "" => DEFAULT_MAX_PER_ORDER.min(capacity.max(1)),
            raw => whole(raw, 1, i64::from(MAX_QUANTITY)).for_field(&field("max_per_order"))?,
        };
        let max_per_buyer = match self.max_per_buyer.trim() {
            "" => max_per_order,
            raw => whole(raw, 1, MAX_PER_BUYER).for_field(&field("max_per_buyer"))?,
        };
        if max_per_buyer < max_per_order {
            return Err(InvalidField::new(
                field("max_per_buyer"),
                "The limit per buyer cannot be below the limit per order.",
            ));
        }
        Ok(NewTicketType {
            row: index,
            id: self.id,
            name,
            price,
            capacity: capacity as i32,
            max_per_order: max_per_order as i32,
            max_per_buyer: max_per_buyer as i32,
            hidden: self.hidden,
        })
    }
}
