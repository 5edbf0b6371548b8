//! The organizer API for an event's waiting room: its settings, and live
//! figures (queue length, admitted, live passes, time to clear).

use axum::{
    Extension, Json,
    extract::{Path, State},
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{
    auth::CurrentOrganizer,
    db,
    domain::EventId,
    error::AppError,
    waiting_room::{self, RoomSettings},
    web::{
        AppState,
        error::ApiError,
        extract::{ApiJson, parse_id},
    },
};

/// `PUT` body: the whole of the settings (absent fields take the defaults).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RoomBody {
    enabled: bool,
    #[serde(default = "default_prequeue")]
    prequeue_minutes: i32,
    #[serde(default)]
    admit_per_minute: Option<i32>,
    #[serde(default)]
    max_active: Option<i32>,
    #[serde(default = "default_pass")]
    pass_minutes: i32,
    #[serde(default)]
    paused: bool,
}

fn default_prequeue() -> i32 {
    RoomSettings::default().prequeue_minutes
}

fn default_pass() -> i32 {
    RoomSettings::default().pass_minutes
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RoomState {
    event_id: EventId,
    enabled: bool,
    prequeue_minutes: i32,
    admit_per_minute: Option<i32>,
    max_active: Option<i32>,
    pass_minutes: i32,
    paused: bool,
    commitment_sha256: String,
    /// The seed, once the pre-queue is shuffled.
    seed: Option<String>,
    waiting: i64,
    admitted: i64,
    /// Admitted in the last minute.
    admitted_last_minute: i64,
    active_passes: i64,
    /// From the rate; `null` without one.
    estimated_secs_to_clear: Option<i64>,
}

async fn owned(
    state: &AppState,
    organizer: &CurrentOrganizer,
    id: &str,
) -> Result<EventId, AppError> {
    Ok(
        db::events::find_owned(&state.db, organizer.id, parse_id(id)?)
            .await?
            .event
            .id,
    )
}

/// The room as the organizer API shows it; the dashboard page's live
/// figures read the same (`GET /organizer/events/{id}/waiting-room.json`).
pub(crate) async fn room_state(state: &AppState, event_id: EventId) -> Result<RoomState, AppError> {
    let status = waiting_room::status(&state.db, event_id, state.clock.now())
        .await?
        .ok_or(AppError::NotFound)?;
    let estimated_secs_to_clear = status.estimated_secs_to_clear();
    let (room, figures) = (status.room, status.figures);
    let s = &room.settings;
    Ok(RoomState {
        event_id,
        enabled: s.enabled,
        prequeue_minutes: s.prequeue_minutes,
        admit_per_minute: s.admit_per_minute,
        max_active: s.max_active,
        pass_minutes: s.pass_minutes,
        paused: s.paused,
        commitment_sha256: room.commitment_hex(),
        seed: room.revealed_seed_hex(),
        waiting: figures.waiting,
        admitted: figures.admitted,
        admitted_last_minute: figures.admitted_last_minute,
        active_passes: figures.active_passes,
        estimated_secs_to_clear,
    })
}

/// `GET /api/v1/organizer/events/{id}/waiting-room`: 404 if never set.
#[utoipa::path(
    get,
    path = "/api/v1/organizer/events/{id}/waiting-room",
    tag = "organizer",
    summary = "An event's waiting room: settings and live figures",
    params(("id" = uuid::Uuid, Path, description = "The event's id")),
    responses(
        (status = 200, description = "Settings, queue length, admitted, live passes, time to clear", body = RoomState),
        (status = 404, description = "You have no event with this id, or it never had a waiting room", body = crate::web::error::ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn get_room(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> Result<Json<RoomState>, ApiError> {
    let event_id = owned(&state, &organizer, &id).await?;
    Ok(Json(room_state(&state, event_id).await?))
}

/// `PUT /api/v1/organizer/events/{id}/waiting-room`: set it (pause and
/// resume are `paused`).
#[utoipa::path(
    put,
    path = "/api/v1/organizer/events/{id}/waiting-room",
    tag = "organizer",
    summary = "Set an event's waiting room (pause and resume are `paused`)",
    params(("id" = uuid::Uuid, Path, description = "The event's id")),
    request_body = RoomBody,
    responses(
        (status = 200, description = "The room as set, with live figures", body = RoomState),
        (status = 400, description = "Not a JSON object", body = crate::web::error::ErrorBody),
        (status = 404, description = "You have no event with this id", body = crate::web::error::ErrorBody),
        (status = 409, description = "The event cannot take this change now", body = crate::web::error::ErrorBody),
        (status = 422, description = "A setting is out of range; `field` names it", body = crate::web::error::ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn put_room(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<RoomBody>,
) -> Result<Json<RoomState>, ApiError> {
    let event_id = owned(&state, &organizer, &id).await?;
    let settings = RoomSettings {
        enabled: body.enabled,
        prequeue_minutes: body.prequeue_minutes,
        admit_per_minute: body.admit_per_minute,
        max_active: body.max_active,
        pass_minutes: body.pass_minutes,
        paused: body.paused,
    };
    // The table's named constraints name the field that is wrong.
    waiting_room::save(&state.db, event_id, &settings).await?;
    state.sales.rooms().forget(event_id).await;
    Ok(Json(room_state(&state, event_id).await?))
}
