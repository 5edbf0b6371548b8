//! One event: read, update, publish, unpublish, cancel.

use axum::{
    Extension, Json,
    extract::{Path, State},
};

use super::{ApiResult, editable, owned, save};
use crate::web::api::organizer_wire::{OrganizerEventBody, UpdateEvent, input_of};
use crate::{
    auth::CurrentOrganizer,
    db,
    domain::{EventId, EventStatus},
    sale,
    web::{
        AppState,
        error::ErrorBody,
        extract::{ApiJson, parse_id},
    },
};

/// `GET /api/v1/organizer/events/{id}`.
#[utoipa::path(
    get,
    path = "/api/v1/organizer/events/{id}",
    tag = "organizer",
    summary = "Read one of your events",
    params(
        ("id" = uuid::Uuid, Path, description = "The event's id"),
    ),
    responses(
        (status = 200, description = "The event, each ticket type with its availability", body = OrganizerEventBody),
        (status = 404, description = "You have no event with this id", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(in crate::web::api) async fn get_event(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> ApiResult<Json<OrganizerEventBody>> {
    Ok(Json(owned(&state, &organizer, &id).await?.into()))
}

/// `PATCH /api/v1/organizer/events/{id}`: the edit page's update, with the
/// fields sent laid over the stored ones.
#[utoipa::path(
    patch,
    path = "/api/v1/organizer/events/{id}",
    tag = "organizer",
    summary = "Change an event",
    description = "The fields sent replace the stored ones; absent fields stay. Raising a capacity adds to what is left; lowering it below what is sold is refused, naming the row.",
    params(
        ("id" = uuid::Uuid, Path, description = "The event's id"),
    ),
    request_body = UpdateEvent,
    responses(
        (status = 200, description = "The event as changed", body = OrganizerEventBody),
        (status = 400, description = "Not a JSON body", body = ErrorBody),
        (status = 404, description = "You have no event with this id", body = ErrorBody),
        (status = 409, description = "The event is cancelled (`event_cancelled`)", body = ErrorBody),
        (status = 422, description = "A field is invalid, or a capacity or limit per buyer would go below what is sold or held; `field` names it", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(in crate::web::api) async fn update_event(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<UpdateEvent>,
) -> ApiResult<Json<OrganizerEventBody>> {
    let detail = editable(&state, &organizer, &id).await?;
    let mut input = input_of(&detail);
    let rows = body.apply(&mut input)?;
    // The page names a ticket type by its row among the event's; the API
    // by its row in the request.
    let rename = |index: usize| {
        rows.iter()
            .position(|&row| row == index)
            .map(|i| format!("ticket_types[{i}]."))
    };
    save(&state, &organizer, detail.event.id, &input, rename).await?;
    Ok(Json(owned(&state, &organizer, &id).await?.into()))
}

/// `POST .../publish`, `.../unpublish`: the dashboard's buttons.
#[utoipa::path(
    post,
    path = "/api/v1/organizer/events/{id}/publish",
    tag = "organizer",
    summary = "Publish an event",
    params(
        ("id" = uuid::Uuid, Path, description = "The event's id"),
    ),
    responses(
        (status = 200, description = "The event, published", body = OrganizerEventBody),
        (status = 404, description = "You have no event with this id", body = ErrorBody),
        (status = 409, description = "The event is cancelled (`event_cancelled`)", body = ErrorBody),
        (status = 422, description = "The quota of published events is used up (`field`: `status`)", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(in crate::web::api) async fn publish(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> ApiResult<Json<OrganizerEventBody>> {
    set_status(&state, &organizer, &id, EventStatus::Published).await
}

#[utoipa::path(
    post,
    path = "/api/v1/organizer/events/{id}/unpublish",
    tag = "organizer",
    summary = "Unpublish an event (back to draft)",
    params(
        ("id" = uuid::Uuid, Path, description = "The event's id"),
    ),
    responses(
        (status = 200, description = "The event, a draft again", body = OrganizerEventBody),
        (status = 404, description = "You have no event with this id", body = ErrorBody),
        (status = 409, description = "The event is cancelled (`event_cancelled`)", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(in crate::web::api) async fn unpublish(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> ApiResult<Json<OrganizerEventBody>> {
    set_status(&state, &organizer, &id, EventStatus::Draft).await
}

async fn set_status(
    state: &AppState,
    organizer: &CurrentOrganizer,
    id: &str,
    status: EventStatus,
) -> ApiResult<Json<OrganizerEventBody>> {
    let detail = editable(state, organizer, id).await?;
    let event_id = detail.event.id;
    db::events::set_status(&state.db, organizer.id, &state.quotas, event_id, status).await?;
    state.events.forget(event_id).await;
    Ok(Json(owned(state, organizer, id).await?.into()))
}

/// `POST .../cancel`: sales stop and every order is cancelled (the
/// dashboard's cancel; repeating it finishes an interrupted one).
#[utoipa::path(
    post,
    path = "/api/v1/organizer/events/{id}/cancel",
    tag = "organizer",
    summary = "Cancel an event and all its orders",
    description = "Sales stop and every order is cancelled. Repeating it finishes an interrupted cancel.",
    params(
        ("id" = uuid::Uuid, Path, description = "The event's id"),
    ),
    responses(
        (status = 200, description = "The event, cancelled", body = OrganizerEventBody),
        (status = 404, description = "You have no event with this id", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(in crate::web::api) async fn cancel_event(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> ApiResult<Json<OrganizerEventBody>> {
    let event_id: EventId = parse_id(&id)?;
    sale::cancel_event(&state.db, organizer.id, event_id).await?;
    state.events.forget(event_id).await;
    Ok(Json(owned(&state, &organizer, &id).await?.into()))
}
