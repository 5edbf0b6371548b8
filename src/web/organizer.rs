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
        organizer::{EventForm, form},
    },
};
use crate::{
    auth::CurrentOrganizer,
    db::{self, events::EventDetail},
    domain::{EventId, EventInput, EventStatus, SaleState, TicketTypeInput, decimal_price},
    error::AppError,
    sale,
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
    Ok(form(
        &ctx,
        &EventForm {
            event: Some((detail.event.id, detail.event.sale_state(state.clock.now()))),
            input: &input,
            error: None,
        },
    ))
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
    let result = match input.parse() {
        Ok(new) => {
            db::events::update(
                &state.db,
                organizer.id,
                &state.quotas,
                detail.event.id,
                &new,
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
        ticket_types,
    })
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
            })
            .collect(),
    }
}
