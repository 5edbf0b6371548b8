//! The event form: read from its fields (as many ticket type rows as it
//! carries), filled from a stored event, and shown again when refused.

use axum::response::{IntoResponse, Response};

use crate::web::{
    extract::{FormFields, PageContext, parse_id},
    views::{
        FormError,
        organizer::{EventForm, form},
    },
};
use crate::{
    db::events::EventDetail,
    domain::{
        EventId, EventInput, SaleState, TicketTypeInput, decimal_price, hold_minutes_text,
        payment_text,
    },
    error::AppError,
};

/// Rows the form can carry: the most ticket types plus the blank rows.
const MAX_FORM_ROWS: usize = crate::domain::MAX_TICKET_TYPES + 3;

/// The form again, as typed, with the reason it was refused.
pub(super) fn refill(
    ctx: &PageContext,
    event: Option<(EventId, SaleState)>,
    input: &EventInput,
    err: AppError,
) -> Result<Response, AppError> {
    if matches!(
        err,
        AppError::Overloaded | AppError::Internal(_) | AppError::NotFound
    ) {
        return Err(err);
    }
    let page = form(
        ctx,
        &EventForm {
            event,
            input,
            error: Some(FormError::from_app(&err)),
            room: None,
        },
    );
    Ok((err.status(), page).into_response())
}

pub(super) fn event_input(fields: &FormFields) -> Result<EventInput, AppError> {
    let mut ticket_types = Vec::new();
    for i in 0..MAX_FORM_ROWS {
        let get = |name: &str| fields.get(&format!("tt_{name}_{i}")).to_owned();
        let id = match fields.get(&format!("tt_id_{i}")) {
            "" => None,
            raw => Some(parse_id(raw).map_err(|_| {
                AppError::BadRequest(format!("tt_id_{i} is not a ticket type id."))
            })?),
        };
        let row = TicketTypeInput {
            id,
            name: get("name"),
            price: get("price"),
            price_is_minor: false,
            currency: get("currency"),
            capacity: get("capacity"),
            max_per_order: get("max_per_order"),
            max_per_buyer: get("max_per_buyer"),
            hidden: get("hidden") == "on",
        };
        ticket_types.push(row);
    }
    // Drop trailing rows the form never had, keep indexes of the others.
    while ticket_types.last().is_some_and(TicketTypeInput::is_blank) {
        ticket_types.pop();
    }
    Ok(EventInput {
        title: fields.get("title").to_owned(),
        description: fields.get("description").to_owned(),
        venue: fields.get("venue").to_owned(),
        starts_at: fields.get("starts_at").to_owned(),
        sale_opens_at: fields.get("sale_opens_at").to_owned(),
        sale_closes_at: fields.get("sale_closes_at").to_owned(),
        status: fields.get("status").to_owned(),
        max_per_buyer: fields.get("max_per_buyer").to_owned(),
        hold_minutes: fields.get("hold_minutes").to_owned(),
        pay_minutes: fields.get("pay_minutes").to_owned(),
        payment: fields.get("payment").to_owned(),
        time_zone: fields.get("time_zone").to_owned(),
        ticket_types,
    })
}

/// The form shows times to the minute, in the event's zone. A time sent
/// back as it was shown, in the same zone, keeps its exact stored value: an
/// event made through the API may open its sale at 10:00:30, and editing
/// its title must not move that to 10:00. (A new zone reads the times as
/// typed in it: the organizer fixing a wrong zone keeps the wall times.)
/// An edit without the `payment` field (a form from before it existed)
/// keeps who takes the money; one without `time_zone`, the zone.
pub(super) fn keep_unchanged(input: &EventInput, detail: &EventDetail) -> EventInput {
    let event = &detail.event;
    let time_zone = match input.time_zone.trim() {
        "" => event.zone.name().to_owned(),
        sent => sent.to_owned(),
    };
    let same_zone = crate::domain::Zone::parse(&time_zone).is_ok_and(|zone| zone == event.zone);
    let exact = |sent: &str, stored: time::OffsetDateTime| {
        if same_zone && sent.trim() == event.zone.input_value(stored) {
            stored
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_else(|_| sent.to_owned())
        } else {
            sent.to_owned()
        }
    };
    EventInput {
        starts_at: exact(&input.starts_at, event.starts_at),
        sale_opens_at: exact(&input.sale_opens_at, event.sale_opens_at),
        sale_closes_at: match event.sale_closes_at {
            Some(stored) => exact(&input.sale_closes_at, stored),
            None => input.sale_closes_at.clone(),
        },
        payment: if input.payment.trim().is_empty() {
            payment_text(event.takes_payment)
        } else {
            input.payment.clone()
        },
        time_zone,
        ..input.clone()
    }
}

pub(super) fn input_from(detail: &EventDetail) -> EventInput {
    let event = &detail.event;
    EventInput {
        title: event.title.clone(),
        description: event.description.clone(),
        venue: event.venue.clone(),
        starts_at: event.zone.input_value(event.starts_at),
        sale_opens_at: event.zone.input_value(event.sale_opens_at),
        sale_closes_at: event
            .sale_closes_at
            .map(|at| event.zone.input_value(at))
            .unwrap_or_default(),
        status: event.status.as_str().to_owned(),
        max_per_buyer: event
            .max_per_buyer
            .map(|n| n.to_string())
            .unwrap_or_default(),
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
                price: decimal_price(tt.price_minor, &tt.currency),
                price_is_minor: false,
                currency: tt.currency.clone(),
                capacity: tt.capacity.to_string(),
                max_per_order: tt.max_per_order.to_string(),
                max_per_buyer: tt.max_per_buyer.to_string(),
                hidden: tt.hidden,
            })
            .collect(),
    }
}
