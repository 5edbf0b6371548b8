//! The organizer API's bodies (`/api/v1/organizer/...`), apart from the
//! rows they are built from. Requests refuse unknown fields and carry
//! plain JSON values that the handlers parse into domain types (through the
//! edit page's [`EventInput`], so the API and the page share their rules);
//! responses are plain structs: RFC 3339 times, amounts in minor units with
//! their currency.

//!
//! A module per resource; the readers and writers they share are here.

mod event;
mod order;
mod stats;
mod ticket_type;

use serde::{Deserialize, Deserializer};
use time::{OffsetDateTime, format_description::well_known::Rfc3339};

pub use event::{OrganizerEventBody, UpdateEvent, input_of};
pub use order::{OrderPageBody, OrganizerOrderBody};
pub use stats::{SalesSeriesBody, StatsBody};
pub use ticket_type::{CreateTicketType, TicketTypeAvailability, TicketTypeList, UpdateTicketType};

/// `Some(None)` for an explicit `null` (clear it), `None` when absent.
pub(super) fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}

pub(super) fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

pub(super) fn number(n: Option<i64>) -> String {
    n.map(|n| n.to_string()).unwrap_or_default()
}
