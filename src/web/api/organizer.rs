//! The organizer API v1 under `/api/v1/organizer` (issue 11): one event,
//! its ticket types, its orders and its sales. Behind the token check and
//! the per-token rate limit (`web::mod`); every query is scoped to the
//! token's organizer, so another organizer's object is "not found". The
//! writes are the dashboard's own: the edit page's update
//! (`db::events::update`), publish and unpublish, the event's cancel, and
//! the sale path's order cancel.

use axum::{
    Extension, Json, Router,
    extract::{Path, RawQuery, State},
    http::StatusCode,
    routing::{get, patch, post},
};

use super::organizer_wire::{
    CreateTicketType, OrderPageBody, OrganizerEventBody, OrganizerOrderBody, SalesSeriesBody,
    StatsBody, TicketTypeAvailability, TicketTypeList, UpdateEvent, UpdateTicketType, input_of,
};
use crate::{
    auth::CurrentOrganizer,
    db::{self, events::EventDetail},
    domain::{
        EventId, EventInput, EventStatus, InvalidField, OrderQuery, SalesRange, TicketTypeId,
    },
    error::AppError,
    sale,
    web::{
        AppState,
        error::ApiError,
        extract::{ApiJson, parse_id},
    },
};

type ApiResult<T> = Result<T, ApiError>;

/// The routes; the caller puts them behind the token check.
pub fn routes() -> Router<AppState> {
    const EVENT: &str = "/api/v1/organizer/events/{id}";
    Router::new()
        .route(EVENT, get(get_event).patch(update_event))
        .route(&format!("{EVENT}/publish"), post(publish))
        .route(&format!("{EVENT}/unpublish"), post(unpublish))
        .route(&format!("{EVENT}/cancel"), post(cancel_event))
        .route(
            &format!("{EVENT}/ticket-types"),
            get(list_ticket_types).post(create_ticket_type),
        )
        .route(
            &format!("{EVENT}/ticket-types/{{tt}}"),
            patch(update_ticket_type).delete(delete_ticket_type),
        )
        .route(&format!("{EVENT}/orders"), get(list_orders))
        .route(&format!("{EVENT}/stats"), get(stats))
        .route(&format!("{EVENT}/stats/sales"), get(sales_per_minute))
        .route(
            &format!("{EVENT}/waiting-room"),
            get(super::waiting_room::get_room).put(super::waiting_room::put_room),
        )
        .route("/api/v1/organizer/orders/{id}", get(get_order))
        .route("/api/v1/organizer/orders/{id}/cancel", post(cancel_order))
}

async fn owned(
    state: &AppState,
    organizer: &CurrentOrganizer,
    id: &str,
) -> Result<EventDetail, AppError> {
    db::events::find_owned(&state.db, organizer.id, parse_id(id)?).await
}

/// An owned event that can still change.
async fn editable(
    state: &AppState,
    organizer: &CurrentOrganizer,
    id: &str,
) -> Result<EventDetail, AppError> {
    let detail = owned(state, organizer, id).await?;
    if detail.event.status == EventStatus::Cancelled {
        return Err(AppError::EventCancelled);
    }
    Ok(detail)
}

/// `GET /api/v1/organizer/events/{id}`.
async fn get_event(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> ApiResult<Json<OrganizerEventBody>> {
    Ok(Json(owned(&state, &organizer, &id).await?.into()))
}

/// `PATCH /api/v1/organizer/events/{id}`: the edit page's update, with the
/// fields sent laid over the stored ones.
async fn update_event(
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

/// Parse and save `input` as the edit page does; an error about the
/// event's ticket type at `index` is renamed by `rename(index)` (a prefix
/// for the field within that row), or kept as the page names it.
async fn save(
    state: &AppState,
    organizer: &CurrentOrganizer,
    event_id: EventId,
    input: &EventInput,
    rename: impl Fn(usize) -> Option<String>,
) -> Result<(), AppError> {
    let renamed = |err: AppError| match err {
        AppError::Invalid(invalid) => AppError::Invalid(rename_field(invalid, &rename)),
        other => other,
    };
    let new = input.parse().map_err(|e| renamed(e.into()))?;
    db::events::update(&state.db, organizer.id, &state.quotas, event_id, &new)
        .await
        .map_err(renamed)?;
    state.events.forget(event_id).await;
    Ok(())
}

fn rename_field(invalid: InvalidField, rename: &impl Fn(usize) -> Option<String>) -> InvalidField {
    let renamed = invalid
        .field
        .strip_prefix("ticket_types[")
        .and_then(|rest| rest.split_once("]."))
        .and_then(|(index, field)| {
            let prefix = rename(index.parse().ok()?)?;
            Some(format!("{prefix}{field}"))
        });
    match renamed {
        Some(field) => InvalidField::new(field, invalid.message),
        None => invalid,
    }
}

/// `POST .../publish`, `.../unpublish`: the dashboard's buttons.
async fn publish(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> ApiResult<Json<OrganizerEventBody>> {
    set_status(&state, &organizer, &id, EventStatus::Published).await
}

async fn unpublish(
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
async fn cancel_event(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> ApiResult<Json<OrganizerEventBody>> {
    let event_id: EventId = parse_id(&id)?;
    sale::cancel_event(&state.db, organizer.id, event_id).await?;
    state.events.forget(event_id).await;
    Ok(Json(owned(&state, &organizer, &id).await?.into()))
}

/// `GET .../ticket-types`: each with its live availability.
async fn list_ticket_types(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> ApiResult<Json<TicketTypeList>> {
    Ok(Json(
        owned(&state, &organizer, &id).await?.ticket_types.into(),
    ))
}

/// `POST .../ticket-types` → 201: a new row of the edit page.
async fn create_ticket_type(
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
async fn update_ticket_type(
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
async fn delete_ticket_type(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path((id, tt)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let event_id: EventId = parse_id(&id)?;
    db::events::delete_ticket_type(&state.db, organizer.id, event_id, parse_id(&tt)?).await?;
    state.events.forget(event_id).await;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET .../orders?limit=&after=&modified_since=&status=&email=`.
async fn list_orders(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<OrderPageBody>> {
    let detail = owned(&state, &organizer, &id).await?;
    let query = OrderQuery::parse(query.as_deref())?;
    let (orders, next) =
        db::order_sync::page(&state.db, organizer.id, detail.event.id, &query).await?;
    Ok(Json(OrderPageBody::new(orders, next)))
}

/// `GET /api/v1/organizer/orders/{id}`.
async fn get_order(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> ApiResult<Json<OrganizerOrderBody>> {
    let order = db::order_sync::find_owned(&state.db, organizer.id, parse_id(&id)?).await?;
    Ok(Json(order.into()))
}

/// `POST /api/v1/organizer/orders/{id}/cancel`: the sale path's cancel; its
/// tickets come back once (a second cancel is 409 `already_cancelled`).
async fn cancel_order(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> ApiResult<Json<OrganizerOrderBody>> {
    let order_id = parse_id(&id)?;
    let order =
        sale::cancel_by_organizer(&state.db, state.clock.now(), organizer.id, order_id).await?;
    state.events.forget_ticket_type(order.ticket_type_id).await;
    let order = db::order_sync::find_owned(&state.db, organizer.id, order_id).await?;
    Ok(Json(order.into()))
}

/// `GET .../stats`: the dashboard's sales table.
async fn stats(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> ApiResult<Json<StatsBody>> {
    let event_id = owned(&state, &organizer, &id).await?.event.id;
    let (sales, totals) = db::dashboard::sales(&state.db, organizer.id, event_id).await?;
    Ok(Json(StatsBody::new(event_id, sales, totals)))
}

/// `GET .../stats/sales?from=&to=`: tickets sold per minute.
async fn sales_per_minute(
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
