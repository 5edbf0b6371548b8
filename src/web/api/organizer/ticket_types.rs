//! An event's ticket types: list, create, update, delete.

use axum::{
    Extension, Json,
    extract::{Path, State},
    http::StatusCode,
};

use super::{ApiResult, editable, owned, save};
use crate::web::api::organizer_wire::{
    CreateTicketType, TicketTypeAvailability, TicketTypeList, UpdateTicketType, input_of,
};
use crate::{
    auth::CurrentOrganizer,
    db,
    domain::{EventId, TicketTypeId},
    error::AppError,
    web::{
        AppState,
        error::ErrorBody,
        extract::{ApiJson, parse_id},
    },
};

/// `GET .../ticket-types`: each with its live availability.
#[utoipa::path(
    get,
    path = "/api/v1/organizer/events/{id}/ticket-types",
    tag = "organizer",
    summary = "List an event's ticket types with their availability",
    params(
        ("id" = uuid::Uuid, Path, description = "The event's id"),
    ),
    responses(
        (status = 200, description = "Every ticket type (one page: an event has at most 20)", body = TicketTypeList),
        (status = 404, description = "You have no event with this id", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(in crate::web::api) async fn list_ticket_types(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> ApiResult<Json<TicketTypeList>> {
    Ok(Json(
        owned(&state, &organizer, &id).await?.ticket_types.into(),
    ))
}

/// `POST .../ticket-types` → 201: a new row of the edit page.
#[utoipa::path(
    post,
    path = "/api/v1/organizer/events/{id}/ticket-types",
    tag = "organizer",
    summary = "Add a ticket type",
    params(
        ("id" = uuid::Uuid, Path, description = "The event's id"),
    ),
    request_body = CreateTicketType,
    responses(
        (status = 201, description = "The new ticket type", body = TicketTypeAvailability),
        (status = 400, description = "Not a JSON body", body = ErrorBody),
        (status = 404, description = "You have no event with this id", body = ErrorBody),
        (status = 409, description = "The event is cancelled (`event_cancelled`)", body = ErrorBody),
        (status = 422, description = "A field is invalid, or a capacity or limit per buyer would go below what is sold or held; `field` names it", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(in crate::web::api) async fn create_ticket_type(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<CreateTicketType>,
) -> ApiResult<(StatusCode, Json<TicketTypeAvailability>)> {
    let detail = editable(&state, &organizer, &id).await?;
    let mut input = input_of(&detail);
    let new_row = input.ticket_types.len();
    input.ticket_types.push(body.into_input());
    save(&state, &organizer, detail.event.id, &input, |index| {
        (index == new_row).then(String::new)
    })
    .await?;
    let created = owned(&state, &organizer, &id)
        .await?
        .ticket_types
        .into_iter()
        .find(|tt| !detail.ticket_types.iter().any(|old| old.id == tt.id))
        .ok_or(AppError::NotFound)?;
    Ok((StatusCode::CREATED, Json(created.into())))
}

/// `PATCH .../ticket-types/{tt}`: a row of the edit page changed.
#[utoipa::path(
    patch,
    path = "/api/v1/organizer/events/{id}/ticket-types/{tt}",
    tag = "organizer",
    summary = "Change a ticket type",
    params(
        ("id" = uuid::Uuid, Path, description = "The event's id"),
        ("tt" = uuid::Uuid, Path, description = "The ticket type's id"),
    ),
    request_body = UpdateTicketType,
    responses(
        (status = 200, description = "The ticket type as changed", body = TicketTypeAvailability),
        (status = 400, description = "Not a JSON body", body = ErrorBody),
        (status = 404, description = "You have no event with this id, or it has no such ticket type", body = ErrorBody),
        (status = 409, description = "The event is cancelled (`event_cancelled`)", body = ErrorBody),
        (status = 422, description = "A field is invalid, or a capacity or limit per buyer would go below what is sold or held; `field` names it", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(in crate::web::api) async fn update_ticket_type(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path((id, tt)): Path<(String, String)>,
    ApiJson(body): ApiJson<UpdateTicketType>,
) -> ApiResult<Json<TicketTypeAvailability>> {
    let detail = editable(&state, &organizer, &id).await?;
    let tt_id: TicketTypeId = parse_id(&tt)?;
    let mut input = input_of(&detail);
    let row = input
        .ticket_types
        .iter()
        .position(|t| t.id == Some(tt_id))
        .ok_or(AppError::NotFound)?;
    body.apply(&mut input.ticket_types[row]);
    save(&state, &organizer, detail.event.id, &input, |index| {
        (index == row).then(String::new)
    })
    .await?;
    let updated = owned(&state, &organizer, &id)
        .await?
        .ticket_types
        .into_iter()
        .find(|t| t.id == tt_id)
        .ok_or(AppError::NotFound)?;
    Ok(Json(updated.into()))
}

/// `DELETE .../ticket-types/{tt}` → 204, only while nothing is sold.
#[utoipa::path(
    delete,
    path = "/api/v1/organizer/events/{id}/ticket-types/{tt}",
    tag = "organizer",
    summary = "Delete a ticket type while none is sold",
    params(
        ("id" = uuid::Uuid, Path, description = "The event's id"),
        ("tt" = uuid::Uuid, Path, description = "The ticket type's id"),
    ),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "You have no event with this id, or it has no such ticket type", body = ErrorBody),
        (status = 409, description = "Tickets of it are sold (`ticket_type_sold`), it is the last one (`last_ticket_type`), or the event is cancelled", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(in crate::web::api) async fn delete_ticket_type(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path((id, tt)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let event_id: EventId = parse_id(&id)?;
    db::events::delete_ticket_type(&state.db, organizer.id, event_id, parse_id(&tt)?).await?;
    state.events.forget(event_id).await;
    Ok(StatusCode::NO_CONTENT)
}
