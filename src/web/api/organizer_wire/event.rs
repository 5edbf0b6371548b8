//! An event's bodies: its update, and the event as its organizer sees it.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;

use super::{
    nullable, number, rfc3339,
    ticket_type::{TicketTypeAvailability, UpdateTicketTypeRow},
};
use crate::{
    db::events::EventDetail,
    domain::{EventId, EventInput, InvalidField, TicketTypeInput, hold_minutes_text, payment_text},
};

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
        pay_minutes: hold_minutes_text(Some(event.pay_seconds)),
        payment: payment_text(event.takes_payment),
        time_zone: event.zone.name().to_owned(),
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
    /// Minutes a buyer of a ticket with a price has to pay.
    #[serde(default)]
    #[schema(minimum = 2, maximum = 120)]
    pay_minutes: Option<i64>,
    /// `stripe` or `offline`.
    #[serde(default)]
    payment: Option<String>,
    /// The event's IANA time zone, e.g. `Europe/Berlin`: its pages and
    /// mails show local times in it, and times sent without an offset are
    /// read in it. Instants already stored stay the same instants.
    #[serde(default)]
    time_zone: Option<String>,
    /// Changes to existing ticket types, each named by its `id`.
    #[serde(default)]
    #[schema(max_items = 20)]
    ticket_types: Vec<UpdateTicketTypeRow>,
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
        set(
            &mut input.pay_minutes,
            self.pay_minutes.map(|m| m.to_string()),
        );
        set(&mut input.payment, self.payment);
        // Blank changes nothing (it is not "the deployment's default").
        set(
            &mut input.time_zone,
            self.time_zone.filter(|zone| !zone.trim().is_empty()),
        );
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
    /// The IANA zone its times are shown and typed in.
    time_zone: String,
    #[schema(value_type = crate::web::api::wire::EventStatusName)]
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
            time_zone: event.zone.name().to_owned(),
            status: event.status.as_str(),
            max_per_buyer: event.max_per_buyer,
            ticket_types: detail.ticket_types.into_iter().map(Into::into).collect(),
        }
    }
}
