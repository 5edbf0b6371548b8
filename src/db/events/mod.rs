//! Events and their ticket types: the rows here; create and edit
//! (write.rs), publish (status.rs), read and list (read.rs).

pub(in crate::db) mod guard;
mod read;
mod status;
mod write;

use time::OffsetDateTime;

pub(in crate::db) use guard::lock_organizer;
pub use read::{
    find, find_owned, find_published, list_for_organizer, list_for_organizer_page,
    list_published_page, zone_owned,
};
pub use status::set_status;
pub use write::{create, delete_ticket_type, update};

use crate::domain::{EventId, EventStatus, SaleState, SaleWindow, TicketTypeId, Zone};

#[derive(Debug, Clone)]
pub struct Event {
    pub id: EventId,
    pub title: String,
    pub description: String,
    pub venue: String,
    pub starts_at: OffsetDateTime,
    pub sale_opens_at: OffsetDateTime,
    pub sale_closes_at: Option<OffsetDateTime>,
    pub status: EventStatus,
    /// Per buyer across the ticket types, if the organizer set a limit.
    pub max_per_buyer: Option<i32>,
    /// Orders are held this long for the buyer's confirmation by mail;
    /// `None`: confirmed at once.
    pub hold_seconds: Option<i32>,
    /// Orders of a ticket with a price are held this long for payment.
    pub pay_seconds: i32,
    /// Stripe takes the money for its tickets with a price.
    pub takes_payment: bool,
    /// Its local times are typed and shown in this zone.
    pub zone: Zone,
}

impl Event {
    pub fn window(&self) -> SaleWindow {
        SaleWindow {
            status: self.status,
            opens_at: self.sale_opens_at,
            closes_at: self.sale_closes_at,
            starts_at: self.starts_at,
        }
    }

    pub fn sale_state(&self, now: OffsetDateTime) -> SaleState {
        self.window().state(now)
    }
}

#[derive(Debug, Clone)]
pub struct TicketType {
    pub id: TicketTypeId,
    pub event_id: EventId,
    pub name: String,
    pub price_minor: i64,
    pub currency: String,
    pub capacity: i32,
    pub remaining: i32,
    pub max_per_order: i32,
    pub max_per_buyer: i32,
    /// Sales stopped for good (the event was cancelled).
    pub sales_halted: bool,
    /// Tickets in held orders, waiting for their buyers' confirmation:
    /// taken from `remaining`, but they may come back.
    pub held: i64,
    /// Shown and sold only with a presale code that unlocks it.
    pub hidden: bool,
}

/// An event with its ticket types, in their order.
#[derive(Debug, Clone)]
pub struct EventDetail {
    pub event: Event,
    pub ticket_types: Vec<TicketType>,
}

impl EventDetail {
    pub fn sold_out(&self) -> bool {
        self.ticket_types.iter().all(|t| t.remaining == 0)
    }

    /// Tickets of every type.
    pub fn capacity(&self) -> i64 {
        self.ticket_types
            .iter()
            .map(|t| i64::from(t.capacity))
            .sum()
    }

    /// Tickets of every type in held orders (they may come back).
    pub fn held(&self) -> i64 {
        self.ticket_types.iter().map(|t| t.held).sum()
    }

    /// Tickets of every type still on sale.
    pub fn remaining(&self) -> i64 {
        self.ticket_types
            .iter()
            .map(|t| i64::from(t.remaining))
            .sum()
    }
}
