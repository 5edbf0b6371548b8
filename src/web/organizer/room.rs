//! The waiting room's settings form on the edit page.

use axum::{
    Extension,
    extract::{Path, State},
    response::{IntoResponse, Redirect, Response},
};

use super::form::input_from;
use crate::web::{
    AppState,
    extract::{FormFields, PageContext, parse_id},
    views::{
        FormError,
        organizer::{EventForm, RoomForm, form},
    },
};
use crate::{
    auth::CurrentOrganizer,
    db,
    domain::{EventId, InvalidField},
    error::AppError,
    waiting_room::{self, RoomSettings},
};

/// The room's form as saved (or the defaults, for an event without one).
pub(super) async fn room_form_of(
    state: &AppState,
    event_id: EventId,
) -> Result<RoomForm, AppError> {
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
