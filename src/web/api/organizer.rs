//! The organizer API v1 under `/api/v1/organizer` (issue 11): one event,
//! its ticket types, its orders and its sales. Behind the token check and
//! the per-account rate limit (`web::mod`); every query is scoped to the
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
        EventId, EventInput, EventStatus, InvalidField, OrderQuery, OrderStatus, SalesRange,
        TicketTypeId,
    },
    error::AppError,
    sale,
    web::{
        AppState,
        error::{ApiError, ErrorBody},
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
        .route(
            &format!("{EVENT}/ticket-types/{{tt}}/pause"),
            post(super::pause::pause),
        )
        .route(
            &format!("{EVENT}/ticket-types/{{tt}}/resume"),
            post(super::pause::resume),
        )
        .route(&format!("{EVENT}/orders"), get(list_orders))
        .route(&format!("{EVENT}/stats"), get(stats))
        .route(&format!("{EVENT}/stats/sales"), get(sales_per_minute))
        .route(
            &format!("{EVENT}/presale-codes"),
            get(super::presale::list).post(super::presale::create),
        )
        .route(
            &format!("{EVENT}/waiting-list"),
            get(super::waitlist::get_lists).put(super::waitlist::put_offers),
        )
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
pub(super) async fn get_event(
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
pub(super) async fn update_event(
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
    db::events::update(
        &state.db,
        organizer.id,
        &state.quotas,
        event_id,
        &new,
        state.clock.now(),
    )
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
pub(super) async fn publish(
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
pub(super) async fn unpublish(
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
pub(super) async fn cancel_event(
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
pub(super) async fn list_ticket_types(
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
pub(super) async fn create_ticket_type(
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
pub(super) async fn update_ticket_type(
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
pub(super) async fn delete_ticket_type(
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
#[utoipa::path(
    get,
    path = "/api/v1/organizer/events/{id}/orders",
    tag = "organizer",
    summary = "List an event's orders",
    description = "Cursor pagination in the order of each order's last change, so an incremental sync with `modified_since` sees every change once.",
    params(
        ("id" = uuid::Uuid, Path, description = "The event's id"),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 500, description = "Orders per page (default 100)"),
        ("after" = Option<String>, Query, description = "The `next` cursor of the previous page"),
        ("modified_since" = Option<String>, Query, format = DateTime, description = "Only orders created or changed at or after this RFC 3339 instant"),
        ("status" = Option<OrderStatus>, Query, description = "Only orders with this status"),
        ("email" = Option<String>, Query, description = "Only orders whose email contains this, any case"),
    ),
    responses(
        (status = 200, description = "A page of orders, oldest change first", body = OrderPageBody),
        (status = 404, description = "You have no event with this id", body = ErrorBody),
        (status = 422, description = "A parameter is invalid or unknown; `field` names it", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(super) async fn list_orders(
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
#[utoipa::path(
    get,
    path = "/api/v1/organizer/orders/{id}",
    tag = "organizer",
    summary = "Read one of your orders",
    params(
        ("id" = uuid::Uuid, Path, description = "The order's id"),
    ),
    responses(
        (status = 200, description = "The order", body = OrganizerOrderBody),
        (status = 404, description = "No order of your events has this id", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(super) async fn get_order(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> ApiResult<Json<OrganizerOrderBody>> {
    let order = db::order_sync::find_owned(&state.db, organizer.id, parse_id(&id)?).await?;
    Ok(Json(order.into()))
}

/// `POST /api/v1/organizer/orders/{id}/cancel`: the sale path's cancel; its
/// tickets come back once (a second cancel is 409 `already_cancelled`).
#[utoipa::path(
    post,
    path = "/api/v1/organizer/orders/{id}/cancel",
    tag = "organizer",
    summary = "Cancel an order",
    params(
        ("id" = uuid::Uuid, Path, description = "The order's id"),
    ),
    responses(
        (status = 200, description = "The cancelled order; its tickets are back on sale", body = OrganizerOrderBody),
        (status = 404, description = "No order of your events has this id", body = ErrorBody),
        (status = 409, description = "Already cancelled (`already_cancelled`), or the event has started", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(super) async fn cancel_order(
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
pub(super) async fn stats(
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
pub(super) async fn sales_per_minute(
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
