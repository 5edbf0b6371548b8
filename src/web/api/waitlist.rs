//! The organizer API for an event's waiting lists: read them, and switch
//! the automatic offers (`/api/v1/organizer/events/{id}/waiting-list`).

use axum::{
    Extension, Json,
    extract::{Path, State},
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{
    auth::CurrentOrganizer,
    db::{self, waitlist::ListedEntry},
    domain::{EventId, TicketTypeId},
    web::{
        AppState,
        error::ApiError,
        extract::{ApiJson, parse_id},
    },
};

/// How many wait in line for one ticket type.
#[derive(Debug, Serialize, ToSchema)]
pub struct LineLength {
    ticket_type_id: TicketTypeId,
    waiting: i64,
}

/// An event's waiting lists.
#[derive(Debug, Serialize, ToSchema)]
pub struct WaitingLists {
    /// Whether returned tickets go to the first in line automatically.
    offers: bool,
    /// Per ticket type of the event, how many wait in line.
    lengths: Vec<LineLength>,
    /// The places, per ticket type, those in line first in their order
    /// (at most 2,000).
    entries: Vec<ListedEntry>,
}

/// `PUT` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OffersSwitch {
    /// `true`: tickets that come back go to the waiting lists first (and
    /// what is on sale now goes to those in line at once); `false`: they go
    /// back on sale, and the lists are kept.
    offers: bool,
}

async fn lists(
    state: &AppState,
    organizer: &CurrentOrganizer,
    event_id: EventId,
) -> Result<WaitingLists, ApiError> {
    let detail = db::events::find_owned(&state.db, organizer.id, event_id).await?;
    let lists = db::waitlist::list(&state.db, organizer.id, event_id).await?;
    Ok(WaitingLists {
        offers: lists.offers_on,
        lengths: detail
            .ticket_types
            .iter()
            .map(|t| LineLength {
                ticket_type_id: t.id,
                waiting: lists.waiting(t.id),
            })
            .collect(),
        entries: lists.entries,
    })
}

/// `GET /api/v1/organizer/events/{id}/waiting-list`.
#[utoipa::path(
    get,
    path = "/api/v1/organizer/events/{id}/waiting-list",
    tag = "organizer",
    summary = "An event's waiting lists: their lengths, places and the offers switch",
    params(("id" = uuid::Uuid, Path, description = "The event's id")),
    responses(
        (status = 200, description = "The event's waiting lists", body = WaitingLists),
        (status = 404, description = "You have no event with this id", body = crate::web::error::ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn get_lists(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> Result<Json<WaitingLists>, ApiError> {
    let event_id: EventId = parse_id(&id)?;
    Ok(Json(lists(&state, &organizer, event_id).await?))
}

/// `PUT /api/v1/organizer/events/{id}/waiting-list`.
#[utoipa::path(
    put,
    path = "/api/v1/organizer/events/{id}/waiting-list",
    tag = "organizer",
    summary = "Switch the automatic offers to the waiting lists on or off",
    params(("id" = uuid::Uuid, Path, description = "The event's id")),
    request_body = OffersSwitch,
    responses(
        (status = 200, description = "The event's waiting lists after the switch", body = WaitingLists),
        (status = 400, description = "Not a JSON object", body = crate::web::error::ErrorBody),
        (status = 404, description = "You have no event with this id", body = crate::web::error::ErrorBody),
        (status = 422, description = "A field is wrong; `field` names it", body = crate::web::error::ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn put_offers(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<OffersSwitch>,
) -> Result<Json<WaitingLists>, ApiError> {
    let event_id: EventId = parse_id(&id)?;
    db::waitlist::set_offers(
        &state.db,
        organizer.id,
        event_id,
        body.offers,
        state.clock.now(),
    )
    .await?;
    state.events.forget(event_id).await;
    Ok(Json(lists(&state, &organizer, event_id).await?))
}
