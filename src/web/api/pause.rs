//! Pause and resume the sale of one ticket type, for a price mistake or a
//! problem at the venue: a paused type refuses purchases (`sale_closed`)
//! in the transaction that would take its stock, so no purchase under way
//! slips past the pause; what is sold stays sold. The ticket types of a
//! cancelled event stay paused.

use axum::{
    Extension, Json,
    extract::{Path, State},
};

use super::organizer_wire::TicketTypeAvailability;
use crate::{
    auth::CurrentOrganizer,
    db,
    domain::{EventId, EventStatus, TicketTypeId},
    error::AppError,
    web::{
        AppState,
        error::{ApiError, ErrorBody},
        extract::parse_id,
    },
};

/// `POST .../ticket-types/{tt}/pause`.
#[utoipa::path(
    post,
    path = "/api/v1/organizer/events/{id}/ticket-types/{tt}/pause",
    tag = "organizer",
    summary = "Pause the sale of a ticket type",
    description = "Purchases of it are refused (`sale_closed`) until it is resumed; orders already made stay. Pausing a paused type changes nothing.",
    params(
        ("id" = uuid::Uuid, Path, description = "The event's id"),
        ("tt" = uuid::Uuid, Path, description = "The ticket type's id"),
    ),
    responses(
        (status = 200, description = "The ticket type, `halted` true", body = TicketTypeAvailability),
        (status = 404, description = "You have no event with this id, or it has no such ticket type", body = ErrorBody),
        (status = 409, description = "The event is cancelled (`event_cancelled`)", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(super) async fn pause(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path((id, tt)): Path<(String, String)>,
) -> Result<Json<TicketTypeAvailability>, ApiError> {
    Ok(set(&state, &organizer, &id, &tt, true).await?)
}

/// `POST .../ticket-types/{tt}/resume`.
#[utoipa::path(
    post,
    path = "/api/v1/organizer/events/{id}/ticket-types/{tt}/resume",
    tag = "organizer",
    summary = "Resume the sale of a paused ticket type",
    params(
        ("id" = uuid::Uuid, Path, description = "The event's id"),
        ("tt" = uuid::Uuid, Path, description = "The ticket type's id"),
    ),
    responses(
        (status = 200, description = "The ticket type, `halted` false", body = TicketTypeAvailability),
        (status = 404, description = "You have no event with this id, or it has no such ticket type", body = ErrorBody),
        (status = 409, description = "The event is cancelled (`event_cancelled`): its sale stays stopped", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(super) async fn resume(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path((id, tt)): Path<(String, String)>,
) -> Result<Json<TicketTypeAvailability>, ApiError> {
    Ok(set(&state, &organizer, &id, &tt, false).await?)
}

async fn set(
    state: &AppState,
    organizer: &CurrentOrganizer,
    id: &str,
    tt: &str,
    halted: bool,
) -> Result<Json<TicketTypeAvailability>, AppError> {
    let event_id: EventId = parse_id(id)?;
    let tt_id: TicketTypeId = parse_id(tt)?;
    let changed = db::pause::set(&state.db, organizer.id, event_id, tt_id, halted).await?;
    // Read back through the owner's view: 404 for someone else's event.
    let detail = db::events::find_owned(&state.db, organizer.id, event_id).await?;
    if !changed && detail.event.status == EventStatus::Cancelled {
        return Err(AppError::EventCancelled);
    }
    if changed {
        state.events.forget(event_id).await;
    }
    let ticket_type = detail
        .ticket_types
        .into_iter()
        .find(|t| t.id == tt_id)
        .ok_or(AppError::NotFound)?;
    Ok(Json(ticket_type.into()))
}
