//! Organizer pages under /organizer. The session middleware has already
//! checked the log-in; every query here is scoped to that organizer.

use axum::{
    Extension,
    extract::{Path, State},
    response::{IntoResponse, Redirect, Response},
};
use maud::Markup;

use super::{
    AppState,
    extract::{FormFields, PageContext, parse_id},
    views::{
        self, FormError,
        organizer::{EventForm, RoomForm, form},
    },
};
use crate::{
    auth::CurrentOrganizer,
    db::{self, events::EventDetail},
    domain::{
        EventId, EventInput, EventStatus, InvalidField, SaleState, TicketTypeInput, decimal_price,
        hold_minutes_text,
    },
    error::AppError,
    sale,
    waiting_room::{self, RoomSettings},
};

/// Rows the form can carry: the most ticket types plus the blank rows.
const MAX_FORM_ROWS: usize = crate::domain::MAX_TICKET_TYPES + 3;

pub async fn index(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    ctx: PageContext,
) -> Result<Markup, AppError> {
    let events = db::events::list_for_organizer(&state.db, organizer.id).await?;
    Ok(views::organizer::index(&ctx, &events))
}

pub async fn new_form(ctx: PageContext) -> Markup {
    let input = EventInput::default();
    form(
        &ctx,
        &EventForm {
            event: None,
            input: &input,
            error: None,
            room: None,
        },
    )
}

pub async fn create(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    ctx: PageContext,
    fields: FormFields,
) -> Result<Response, AppError> {
    let input = event_input(&fields)?;
    let result = match input.parse() {
        Ok(new) => db::events::create(&state.db, organizer.id, &state.quotas, &new).await,
        Err(invalid) => Err(invalid.into()),
    };
    match result {
        Ok(id) => Ok(Redirect::to(&format!("/organizer/events/{id}")).into_response()),
        Err(err) => refill(&ctx, None, &input, err),
    }
}

pub async fn edit_form(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    ctx: PageContext,
    Path(id): Path<String>,
) -> Result<Markup, AppError> {
    let detail = db::events::find_owned(&state.db, organizer.id, parse_id(&id)?).await?;
    let input = input_from(&detail);
    let room = room_form_of(&state, detail.event.id).await?;
    Ok(form(
        &ctx,
        &EventForm {
            event: Some((detail.event.id, detail.event.sale_state(state.clock.now()))),
            input: &input,
            error: None,
            room: Some(room),
        },
    ))
}

/// The room's form as saved (or the defaults, for an event without one).
async fn room_form_of(state: &AppState, event_id: EventId) -> Result<RoomForm, AppError> {
    let room = waiting_room::load(&state.db, event_id).await?;
    let settings = room
        .as_ref()
        .map(|r| r.settings.clone())
        .unwrap_or_default();
    let opt = |v: Option<i32>| v.map(|v| v.to_string()).unwrap_or_default();
    let figures = match &room {
        Some(_) => Some(waiting_room::figures(&state.db, event_id, state.clock.now()).await?),
        None => None,
    };
    Ok(RoomForm {
        enabled: settings.enabled,
        prequeue_minutes: settings.prequeue_minutes.to_string(),
        admit_per_minute: opt(settings.admit_per_minute),
        max_active: opt(settings.max_active),
        pass_minutes: settings.pass_minutes.to_string(),
        paused: settings.paused,
        commitment: room.map(|r| r.commitment_hex()),
        figures,
        error: None,
    })
}

/// `POST /organizer/events/{id}/waiting-room`: the room's settings.
pub async fn update_room(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    ctx: PageContext,
    Path(id): Path<String>,
    fields: FormFields,
) -> Result<Response, AppError> {
    let detail = db::events::find_owned(&state.db, organizer.id, parse_id(&id)?).await?;
    let event_id = detail.event.id;
    let result = match room_settings(&fields) {
        Ok(settings) => waiting_room::save(&state.db, event_id, &settings).await,
        Err(invalid) => Err(invalid.into()),
    };
    let err = match result {
        Ok(()) => {
            state.sales.rooms().forget(event_id).await;
            return Ok(
                Redirect::to(&format!("/organizer/events/{event_id}/edit#waiting-room"))
                    .into_response(),
            );
        }
        Err(err @ (AppError::Overloaded | AppError::Internal(_))) => return Err(err),
        Err(err) => err,
    };
    let saved = room_form_of(&state, event_id).await?;
    let room = RoomForm {
        enabled: fields.get("enabled") == "on",
        prequeue_minutes: fields.get("prequeue_minutes").to_owned(),
        admit_per_minute: fields.get("admit_per_minute").to_owned(),
        max_active: fields.get("max_active").to_owned(),
        pass_minutes: fields.get("pass_minutes").to_owned(),
        paused: fields.get("paused") == "on",
        commitment: saved.commitment,
        figures: saved.figures,
        error: Some(FormError::from_app(&err)),
    };
    let input = input_from(&detail);
    let page = form(
        &ctx,
        &EventForm {
            event: Some((event_id, detail.event.sale_state(state.clock.now()))),
            input: &input,
            error: None,
            room: Some(room),
        },
    );
    Ok((err.status(), page).into_response())
}

/// The room's settings from its form; the error names the field.
fn room_settings(fields: &FormFields) -> Result<RoomSettings, InvalidField> {
    let number =
        |name: &str, min: i32, max: i32, message: &str| -> Result<Option<i32>, InvalidField> {
            let raw = fields.get(name).trim();
            if raw.is_empty() {
                return Ok(None);
            }
            match raw.parse::<i32>() {
                Ok(v) if (min..=max).contains(&v) => Ok(Some(v)),
                _ => Err(InvalidField::new(name, message)),
            }
        };
    let required = |name: &str, min: i32, max: i32, message: &str| {
        number(name, min, max, message)?.ok_or_else(|| InvalidField::new(name, message))
    };
    let settings = RoomSettings {
        enabled: fields.get("enabled") == "on",
        prequeue_minutes: required(
            "prequeue_minutes",
            0,
            1440,
            "Enter the minutes between 0 and 1440 before the sale that the pre-queue opens.",
        )?,
        admit_per_minute: number(
            "admit_per_minute",
            1,
            1_000_000,
            "Enter a whole number of buyers per minute, at least 1.",
        )?,
        max_active: number(
            "max_active",
            1,
            1_000_000,
            "Enter a whole number of buyers, at least 1, or leave it empty.",
        )?,
        pass_minutes: required(
            "pass_minutes",
            1,
            1440,
            "Enter how many minutes a pass lasts, between 1 and 1440.",
        )?,
        paused: fields.get("paused") == "on",
    };
    if settings.admit_per_minute.is_none() && settings.max_active.is_none() {
        return Err(InvalidField::new(
            "admit_per_minute",
            "Set a rate of admission, a cap on buyers admitted at once, or both.",
        ));
    }
    Ok(settings)
}

pub async fn update(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    ctx: PageContext,
    Path(id): Path<String>,
    fields: FormFields,
) -> Result<Response, AppError> {
    let detail = db::events::find_owned(&state.db, organizer.id, parse_id(&id)?).await?;
    let input = event_input(&fields)?;
    let result = match keep_unchanged_times(&input, &detail).parse() {
        Ok(new) => {
            db::events::update(
                &state.db,
                organizer.id,
                &state.quotas,
                detail.event.id,
                &new,
                state.clock.now(),
            )
            .await
        }
        Err(invalid) => Err(invalid.into()),
    };
    match result {
        Ok(()) => {
            state.events.forget(detail.event.id).await;
            Ok(Redirect::to(&format!("/organizer/events/{}", detail.event.id)).into_response())
        }
        Err(err) => refill(
            &ctx,
            Some((detail.event.id, detail.event.sale_state(state.clock.now()))),
            &input,
            err,
        ),
    }
}

pub async fn publish(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> Result<Redirect, AppError> {
    set_status(&state, &organizer, &id, EventStatus::Published).await
}

pub async fn unpublish(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> Result<Redirect, AppError> {
    set_status(&state, &organizer, &id, EventStatus::Draft).await
}

/// Cancel the event: sales stop and every order is cancelled.
pub async fn cancel(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> Result<Redirect, AppError> {
    let event_id: EventId = parse_id(&id)?;
    sale::cancel_event(&state.db, organizer.id, event_id).await?;
    state.events.forget(event_id).await;
    Ok(Redirect::to(&format!("/organizer/events/{event_id}")))
}

async fn set_status(
    state: &AppState,
    organizer: &CurrentOrganizer,
    id: &str,
    status: EventStatus,
) -> Result<Redirect, AppError> {
    let event_id: EventId = parse_id(id)?;
    db::events::set_status(&state.db, organizer.id, &state.quotas, event_id, status).await?;
    state.events.forget(event_id).await;
    Ok(Redirect::to(&format!("/organizer/events/{event_id}")))
}

/// The form again, as typed, with the reason it was refused.
fn refill(
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

fn event_input(fields: &FormFields) -> Result<EventInput, AppError> {
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
        ticket_types,
    })
}

/// The form shows times to the minute. A time sent back as it was shown
/// keeps its exact stored value: an event made through the API may open its
/// sale at 10:00:30, and editing its title must not move that to 10:00.
fn keep_unchanged_times(input: &EventInput, detail: &EventDetail) -> EventInput {
    let event = &detail.event;
    let exact = |sent: &str, stored: time::OffsetDateTime| {
        if sent.trim() == views::datetime_local(stored) {
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
        ..input.clone()
    }
}

fn input_from(detail: &EventDetail) -> EventInput {
    let event = &detail.event;
    EventInput {
        title: event.title.clone(),
        description: event.description.clone(),
        venue: event.venue.clone(),
        starts_at: views::datetime_local(event.starts_at),
        sale_opens_at: views::datetime_local(event.sale_opens_at),
        sale_closes_at: event
            .sale_closes_at
            .map(views::datetime_local)
            .unwrap_or_default(),
        status: event.status.as_str().to_owned(),
        max_per_buyer: event
            .max_per_buyer
            .map(|n| n.to_string())
            .unwrap_or_default(),
        hold_minutes: hold_minutes_text(event.hold_seconds),
        ticket_types: detail
            .ticket_types
            .iter()
            .map(|tt| TicketTypeInput {
                id: Some(tt.id),
                name: tt.name.clone(),
                price: decimal_price(tt.price_minor),
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
