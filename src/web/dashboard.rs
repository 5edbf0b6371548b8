//! The organizer's dashboard for one event (`/organizer/events/{id}`) and
//! its CSV export. Behind the session middleware; `find_owned` makes any
//! other organizer's event "not found".

use axum::{
    Extension,
    extract::{Path, RawQuery, State},
    http::{HeaderValue, header},
    response::{IntoResponse, Response},
};
use maud::Markup;

use super::{
    AppState, export,
    extract::{PageContext, parse_id},
    views,
};
use crate::{auth::CurrentOrganizer, db, domain::OrderSearch, error::AppError};

pub async fn show(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    ctx: PageContext,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Markup, AppError> {
    let detail = db::events::find_owned(&state.db, organizer.id, parse_id(&id)?).await?;
    let search = OrderSearch::parse(query.as_deref())?;
    let dashboard = db::dashboard::load(
        &state.db,
        organizer.id,
        detail.event.id,
        &search.q,
        search.page,
    )
    .await?;
    let sale_state = detail.event.sale_state(state.clock.now());
    Ok(views::dashboard::page(
        &ctx, &detail, sale_state, &dashboard,
    ))
}

pub async fn orders_csv(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    let detail = db::events::find_owned(&state.db, organizer.id, parse_id(&id)?).await?;
    let body = export::orders_csv_body(state.db.clone(), organizer.id, detail.event.id)?;
    let disposition = HeaderValue::try_from(format!(
        "attachment; filename=\"orders-{}.csv\"",
        detail.event.id
    ))
    .map_err(AppError::internal)?;
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/csv; charset=utf-8"),
            ),
            (header::CONTENT_DISPOSITION, disposition),
            // Buyers' emails: not for shared caches, nor for the browser's.
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        body,
    )
        .into_response())
}
