//! The organizer API for an event's waiting lists: read them, and switch
//! the automatic offers (`/api/v1/organizer/events/{id}/waiting-list`).

use axum::{
    Extension, Json,
    extract::{Path, RawQuery, State},
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{
    auth::CurrentOrganizer,
    db::{self, waitlist::ListedEntry},
    domain::{EntryCursor, EntryQuery, EventId, TicketTypeId},
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
    /// A page of the places, per ticket type, those in line first in their
    /// order (`limit` of them, 100 by default).
    entries: Vec<ListedEntry>,
    /// The cursor of the next page of `entries` (`?after=`), or null on the
    /// last one.
    next: Option<String>,
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
    page: &EntryQuery,
) -> Result<WaitingLists, ApiError> {
    let detail = db::events::find_owned(&state.db, organizer.id, event_id).await?;
    let lists = db::waitlist::list(&state.db, organizer.id, event_id, page).await?;
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
        next: lists.next.map(|cursor| cursor.encode()),
    })
}

/// `GET /api/v1/organizer/events/{id}/waiting-list`.
#[utoipa::path(
    get,
    path = "/api/v1/organizer/events/{id}/waiting-list",
    tag = "organizer",
    summary = "An event's waiting lists: their lengths, places and the offers switch",
    description = "The places are paged with a cursor (`next`).",
    params(
        ("id" = uuid::Uuid, Path, description = "The event's id"),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 500, description = "Places per page (default 100)"),
        ("after" = Option<String>, Query, description = "The `next` cursor of the previous page"),
    ),
    responses(
        (status = 200, description = "The event's waiting lists, with a page of places", body = WaitingLists),
        (status = 404, description = "You have no event with this id", body = crate::web::error::ErrorBody),
        (status = 422, description = "A parameter is invalid or unknown; `field` names it", body = crate::web::error::ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn get_lists(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<WaitingLists>, ApiError> {
    let event_id: EventId = parse_id(&id)?;
    let page = EntryQuery::parse(query.as_deref(), EntryCursor::parse)?;
    Ok(Json(lists(&state, &organizer, event_id, &page).await?))
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
        (status = 200, description = "The event's waiting lists after the switch, with the first page of places", body = WaitingLists),
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
    Ok(Json(
        lists(&state, &organizer, event_id, &EntryQuery::default()).await?,
    ))
}
