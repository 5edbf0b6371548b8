//! An event's sales: the dashboard's table, and tickets per minute.

use axum::{
    Extension, Json,
    extract::{Path, RawQuery, State},
};

use super::{ApiResult, owned};
use crate::web::api::organizer_wire::{SalesSeriesBody, StatsBody};
use crate::{
    auth::CurrentOrganizer,
    db,
    domain::SalesRange,
    web::{AppState, error::ErrorBody},
};

/// `GET .../stats`: the dashboard's sales table.
#[utoipa::path(
    get,
    path = "/api/v1/organizer/events/{id}/stats",
    tag = "organizer",
    summary = "Read an event's sales figures",
    params(
        ("id" = uuid::Uuid, Path, description = "The event's id"),
    ),
    responses(
        (status = 200, description = "Sold, remaining and revenue per ticket type and currency", body = StatsBody),
        (status = 404, description = "You have no event with this id", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(in crate::web::api) async fn stats(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> ApiResult<Json<StatsBody>> {
    let event_id = owned(&state, &organizer, &id).await?.event.id;
    let (sales, totals) = db::dashboard::sales(&state.db, organizer.id, event_id).await?;
    Ok(Json(StatsBody::new(event_id, sales, totals)))
}

/// `GET .../stats/sales?from=&to=`: tickets sold per minute.
#[utoipa::path(
    get,
    path = "/api/v1/organizer/events/{id}/stats/sales",
    tag = "organizer",
    summary = "Read tickets sold per minute",
    params(
        ("id" = uuid::Uuid, Path, description = "The event's id"),
        ("from" = Option<String>, Query, format = DateTime, description = "Start of the range (RFC 3339)"),
        ("to" = Option<String>, Query, format = DateTime, description = "End of the range (RFC 3339); at most a day after `from`"),
    ),
    responses(
        (status = 200, description = "Tickets sold in every minute of the range", body = SalesSeriesBody),
        (status = 404, description = "You have no event with this id", body = ErrorBody),
        (status = 422, description = "A parameter is invalid or unknown; `field` names it", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(in crate::web::api) async fn sales_per_minute(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<SalesSeriesBody>> {
    let event_id = owned(&state, &organizer, &id).await?.event.id;
    let range = SalesRange::parse(query.as_deref(), state.clock.now())?;
    let minutes = db::dashboard::sales_per_minute(&state.db, organizer.id, event_id, range).await?;
    Ok(Json(SalesSeriesBody::new(event_id, range, minutes)))
}
