//! Organizer pages under /organizer. The session middleware has already
//! checked the log-in; every query here is scoped to that organizer.
//!
//! The event pages here; the event form's fields in form.rs, the waiting
//! room's settings form in room.rs.

mod form;
mod room;

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
        self,
        organizer::{EventForm, form},
    },
};
use crate::{
    auth::CurrentOrganizer,
    db,
    domain::{EventId, EventInput, EventStatus},
    error::AppError,
    sale,
};

pub use room::update_room;

use form::{event_input, input_from, keep_unchanged, refill};
use room::room_form_of;

pub async fn index(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    ctx: PageContext,
) -> Result<Markup, AppError> {
    let events = db::events::list_for_organizer(&state.db, organizer.id).await?;
    let unconfirmed = (!organizer.email_confirmed).then_some(organizer.email.as_str());
    Ok(views::organizer::index(&ctx, &events, unconfirmed))
}

pub async fn new_form(State(state): State<AppState>, ctx: PageContext) -> Markup {
    let input = EventInput {
        time_zone: state.time_zone.name().to_owned(),
        ..EventInput::default()
    };
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
    let result = match input.parse(&state.time_zone) {
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

pub async fn update(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    ctx: PageContext,
    Path(id): Path<String>,
    fields: FormFields,
) -> Result<Response, AppError> {
    let detail = db::events::find_owned(&state.db, organizer.id, parse_id(&id)?).await?;
    let input = event_input(&fields)?;
    let result = match keep_unchanged(&input, &detail).parse(&state.time_zone) {
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
