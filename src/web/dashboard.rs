//! The organizer's dashboard for one event (`/organizer/events/{id}`) and
//! its CSV export. Behind the session middleware; `find_owned` makes any
//! other organizer's event "not found".

use axum::{
    Extension, Json,
    extract::{Path, RawQuery, State},
    http::{HeaderValue, header},
    response::{IntoResponse, Redirect, Response},
};
use maud::Markup;

use super::views::{
    FormError,
    door::{DoorPanel, LinkInput},
};
use super::{
    AppState, export,
    extract::{FormFields, PageContext, parse_id},
    views,
};
use crate::{
    auth::CurrentOrganizer,
    checkin,
    db::{self, events::EventDetail},
    domain::{DoorSecret, InvalidField, OrderSearch},
    error::AppError,
    waiting_room,
};

pub async fn show(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    ctx: PageContext,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Markup, AppError> {
    let detail = db::events::find_owned(&state.db, organizer.id, parse_id(&id)?).await?;
    let now = state.clock.now();
    let input = LinkInput::defaults(now, detail.event.starts_at, &detail.event.zone);
    render(
        &state,
        &organizer,
        &ctx,
        &detail,
        query.as_deref(),
        input,
        None,
        None,
    )
    .await
}

/// The dashboard with its door links panel as given: a link just created
/// (its secret shown this once) or the link form refused and refilled.
#[allow(clippy::too_many_arguments)]
pub(super) async fn render(
    state: &AppState,
    organizer: &CurrentOrganizer,
    ctx: &PageContext,
    detail: &EventDetail,
    query: Option<&str>,
    input: LinkInput,
    created: Option<DoorSecret>,
    error: Option<FormError>,
) -> Result<Markup, AppError> {
    let search = OrderSearch::parse(query)?;
    let dashboard = db::dashboard::load(
        &state.db,
        organizer.id,
        detail.event.id,
        &search.q,
        search.page,
    )
    .await?;
    let links = checkin::links::list(&state.db, organizer.id, detail.event.id).await?;
    let now = state.clock.now();
    let room = waiting_room::status(&state.db, detail.event.id, now).await?;
    let door = DoorPanel {
        links: &links,
        zone: &detail.event.zone,
        now,
        input,
        created,
        error,
    };
    Ok(views::dashboard::page(
        ctx,
        detail,
        detail.event.sale_state(now),
        &dashboard,
        &door,
        room.as_ref(),
    ))
}

/// `POST /organizer/events/{id}/waiting-room/admission` (`paused`: `true`
/// or `false`; CSRF-checked by the layer): pause or resume admission from
/// the dashboard; 303 back to its room panel.
pub async fn set_admission(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
    fields: FormFields,
) -> Result<Response, AppError> {
    let detail = db::events::find_owned(&state.db, organizer.id, parse_id(&id)?).await?;
    let paused = match fields.get("paused") {
        "true" => true,
        "false" => false,
        _ => {
            return Err(InvalidField::new("paused", "Send paused as true or false.").into());
        }
    };
    let event_id = detail.event.id;
    waiting_room::set_paused(&state.db, event_id, paused).await?;
    state.sales.rooms().forget(event_id).await;
    Ok(Redirect::to(&format!("/organizer/events/{event_id}#waiting-room")).into_response())
}

/// `GET /organizer/events/{id}/waiting-room.json`: the room's live figures
/// for the dashboard's script (the session's twin of the organizer API's
/// `GET /api/v1/organizer/events/{id}/waiting-room`).
pub async fn room_json(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> Result<Json<super::api::waiting_room::RoomState>, AppError> {
    let detail = db::events::find_owned(&state.db, organizer.id, parse_id(&id)?).await?;
    Ok(Json(
        super::api::waiting_room::room_state(&state, detail.event.id).await?,
    ))
}

pub async fn orders_csv(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    let detail = db::events::find_owned(&state.db, organizer.id, parse_id(&id)?).await?;
    let body = export::orders_csv_body(
        state.db.clone(),
        organizer.id,
        detail.event.id,
        detail.event.zone.clone(),
        state.limits.export_stall,
    )?;
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
