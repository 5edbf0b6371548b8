//! An event as typed by an organizer or sent by a script, and as checked:
//! its texts, status, limits and hold here; its ticket types and the dates
//! of its sale window in modules of their own.

mod fields;
mod ticket_type;
mod window;

#[cfg(test)]
mod tests;

use time::OffsetDateTime;

pub use ticket_type::{MAX_PER_BUYER, NewTicketType, TicketTypeInput};

use fields::{text, whole};
use window::parse_dates;

use super::{EventStatus, ForField, InvalidField, Lines, SaleWindow, Zone, refuse_control};

pub const MAX_TICKET_TYPES: usize = 20;
/// The longest hold an organizer can choose (the suggested one is 10).
pub const MAX_HOLD_MINUTES: i64 = 120;
/// What the organizer form suggests for a held sale.
pub const DEFAULT_HOLD_MINUTES: i64 = 10;
/// The time to pay for a ticket with a price, unless the organizer sets one.
pub const DEFAULT_PAY_MINUTES: i64 = 15;
pub const MIN_PAY_MINUTES: i64 = 2;
pub const MAX_PAY_MINUTES: i64 = 120;

/// A stored hold as the form's and the API's minutes (rounded up), blank
/// for none.
pub fn hold_minutes_text(hold_seconds: Option<i32>) -> String {
    hold_seconds
        .map(|s| (i64::from(s) + 59).div_euclid(60).to_string())
        .unwrap_or_default()
}
/// A stored choice of who takes the money, as the form's and the API's text.
pub fn payment_text(takes_payment: bool) -> String {
    if takes_payment { "stripe" } else { "offline" }.to_owned()
}

/// An event as typed by an organizer (form) or sent by a script (API):
/// text everywhere, parsed by [`EventInput::parse`].
#[derive(Debug, Clone, Default)]
pub struct EventInput {
    pub title: String,
    pub description: String,
    pub venue: String,
    pub starts_at: String,
    pub sale_opens_at: String,
    pub sale_closes_at: String,
    pub status: String,
    /// The event's limit per buyer across its ticket types; blank for none.
    pub max_per_buyer: String,
    /// Minutes an order is held for its buyer to confirm by mail; blank:
    /// orders are confirmed at once.
    pub hold_minutes: String,
    /// Minutes a buyer of a ticket with a price has to pay; blank: 15.
    pub pay_minutes: String,
    /// Who takes the money for tickets with a price: `stripe` (or blank),
    /// or `offline` (the organizer: at the door, by invoice).
    pub payment: String,
    /// An IANA name; blank: the deployment's default zone.
    pub time_zone: String,
    pub ticket_types: Vec<TicketTypeInput>,
}

#[derive(Debug, Clone)]
pub struct NewEvent {
    pub title: String,
    pub description: String,
    pub venue: String,
    pub starts_at: OffsetDateTime,
    /// Its status and sale window, already checked to be in order.
    pub window: SaleWindow,
    /// At most this many tickets per buyer across the ticket types.
    pub max_per_buyer: Option<i32>,
    /// Orders held this long for the buyer's mailbox confirmation; `None`:
    /// confirmed at once.
    pub hold_seconds: Option<i32>,
    /// Orders of a ticket with a price are held this long for payment.
    pub pay_seconds: i32,
    /// Stripe takes the money for tickets with a price (else the organizer
    /// does, outside Stampede, and such orders are confirmed as free ones).
    pub takes_payment: bool,
    /// The zone its local times were typed in and are shown in.
    pub zone: Zone,
    pub ticket_types: Vec<NewTicketType>,
}

impl EventInput {
    /// Checked, with local times read in the event's zone (`default_zone`
    /// when none is given).
    pub fn parse(&self, default_zone: &Zone) -> Result<NewEvent, InvalidField> {
        let zone = match self.time_zone.trim() {
            "" => default_zone.clone(),
            raw => Zone::parse(raw).for_field("time_zone")?,
        };
        let title = text(&self.title, 200).for_field("title")?;
        let venue = text(&self.venue, 200).for_field("venue")?;
        let description = self.description.trim().to_owned();
        refuse_control(&description, Lines::Many).for_field("description")?;
        if description.chars().count() > 10_000 {
            return Err(InvalidField::new(
                "description",
                "Keep the description under 10,000 characters.",
            ));
        }
        let (starts_at, sale_opens_at, sale_closes_at) = parse_dates(
            &zone,
            &self.starts_at,
            &self.sale_opens_at,
            &self.sale_closes_at,
        )?;
        let max_per_buyer = match self.max_per_buyer.trim() {
            "" => None,
            raw => Some(whole(raw, 1, MAX_PER_BUYER).for_field("max_per_buyer")? as i32),
        };
        let hold_seconds = match self.hold_minutes.trim() {
            "" => None,
            raw => Some(whole(raw, 1, MAX_HOLD_MINUTES).for_field("hold_minutes")? as i32 * 60),
        };
        let pay_minutes = match self.pay_minutes.trim() {
            "" => DEFAULT_PAY_MINUTES,
            raw => whole(raw, MIN_PAY_MINUTES, MAX_PAY_MINUTES).for_field("pay_minutes")?,
        };
        let pay_seconds = i32::try_from(pay_minutes * 60).unwrap_or(i32::MAX);
        let takes_payment = match self.payment.trim() {
            "" | "stripe" => true,
            "offline" => false,
            other => {
                return Err(InvalidField::new(
                    "payment",
                    format!("\"{other}\" is not a way to pay; use stripe or offline."),
                ));
            }
        };
        let status = match self.status.trim() {
            "" | "draft" => EventStatus::Draft,
            "published" => EventStatus::Published,
            other => {
                return Err(InvalidField::new(
                    "status",
                    format!("\"{other}\" is not a status; use draft or published."),
                ));
            }
        };

        let rows: Vec<_> = self
            .ticket_types
            .iter()
            .enumerate()
            .filter(|(_, t)| !t.is_blank())
            .collect();
        if rows.is_empty() {
            return Err(InvalidField::new(
                "ticket_types",
                "Add at least one ticket type.",
            ));
        }
        if rows.len() > MAX_TICKET_TYPES {
            return Err(InvalidField::new(
                "ticket_types",
                format!("An event can have at most {MAX_TICKET_TYPES} ticket types."),
            ));
        }
        let mut ticket_types: Vec<NewTicketType> = Vec::with_capacity(rows.len());
        for (index, row) in rows {
            let parsed = row.parse(index)?;
            if ticket_types
                .iter()
                .any(|t| t.name.eq_ignore_ascii_case(&parsed.name))
            {
                return Err(InvalidField::new(
                    format!("ticket_types[{index}].name"),
                    format!("Two ticket types are called \"{}\".", parsed.name),
                ));
            }
            ticket_types.push(parsed);
        }
        Ok(NewEvent {
            title,
            description,
            venue,
            starts_at,
            window: SaleWindow {
                status,
                opens_at: sale_opens_at,
                closes_at: sale_closes_at,
                starts_at,
            },
            max_per_buyer,
            hold_seconds,
            pay_seconds,
            takes_payment,
            zone,
            ticket_types,
        })
    }
}
