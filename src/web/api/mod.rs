//! JSON API under /api/v1. Errors: `{"error": {"code", "message", "field"}}`.

use axum::{
    Extension, Json,
    extract::{ConnectInfo, Path, RawQuery, State},
    http::StatusCode,
};
use std::net::SocketAddr;

pub mod checkin;
mod create_wire;
pub mod doc;
mod organizer;
mod organizer_wire;
mod pause;
mod presale;
pub(crate) mod waiting_room;
mod waitlist;
mod webhooks;
mod webhooks_wire;
mod wire;

pub use organizer::routes as organizer_routes;
pub use webhooks::routes as webhook_routes;

use create_wire::CreateEvent;
use wire::{CreateOrder, EventBody, EventList, EventPageBody, OrderBody};

use super::{
    AppState,
    error::ApiError,
    extract::{ApiJson, parse_id},
    pages::public_page,
};
use crate::{
    auth::CurrentOrganizer,
    db,
    domain::{
        CancelSecret, ClientKey, Email, EventId, EventListQuery, ForField, IdempotencyKey,
        Quantity, optional_code,
    },
    error::AppError,
    sale::{self, Purchase, PurchaseRequest},
};

type ApiResult<T> = Result<T, ApiError>;

/// `POST /api/v1/organizer/events` → 201 with the event and its ticket types.
#[utoipa::path(
    post,
    path = "/api/v1/organizer/events",
    tag = "organizer",
    summary = "Create an event with its ticket types",
    request_body = CreateEvent,
    responses(
        (status = 201, description = "The event as created", body = EventBody),
        (status = 400, description = "Not a JSON body", body = crate::web::error::ErrorBody),
        (status = 422, description = "A field is invalid, or a quota of the account would be exceeded; `field` names it", body = crate::web::error::ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn create_event(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    ApiJson(body): ApiJson<CreateEvent>,
) -> ApiResult<(StatusCode, Json<EventBody>)> {
    let new = body.into_input().parse(&state.time_zone)?;
    let id = db::events::create(&state.db, organizer.id, &state.quotas, &new).await?;
    let detail = db::events::find(&state.db, id)
        .await?
        .ok_or(AppError::NotFound)?;
    Ok((StatusCode::CREATED, Json(detail.into())))
}

/// `GET /api/v1/organizer/events[?limit=&after=]`: the caller's own
/// events, any status, a page at a time; `next` is the cursor of the next.
#[utoipa::path(
    get,
    path = "/api/v1/organizer/events",
    tag = "organizer",
    summary = "List your own events, any status",
    params(
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 500, description = "Events per page (default 100)"),
        ("after" = Option<String>, Query, description = "The `next` cursor of the previous page"),
    ),
    responses(
        (status = 200, description = "A page of events", body = EventList),
        (status = 422, description = "A parameter is invalid or unknown; `field` names it", body = crate::web::error::ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn list_own_events(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<EventList>> {
    let query = EventListQuery::parse(query.as_deref())?;
    let (events, next) =
        db::events::list_for_organizer_page(&state.db, organizer.id, query).await?;
    Ok(Json(EventList::new(events, next)))
}

/// `GET /api/v1/events[?after=cursor]`: a page of published upcoming
/// events, without descriptions; `next` is the cursor of the next page.
#[utoipa::path(
    get,
    path = "/api/v1/events",
    tag = "public",
    summary = "List published upcoming events",
    params(("after" = Option<String>, Query, description = "The `next` cursor of the previous page")),
    responses(
        (status = 200, description = "A page of events, without descriptions", body = EventPageBody),
        (status = 422, description = "`after` is not a cursor of this list", body = crate::web::error::ErrorBody),
    ),
)]
pub async fn list_events(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<EventPageBody>> {
    let page = public_page(&state, query.as_deref()).await?;
    let mut body = EventPageBody::from(page.as_ref());
    let mut queued = Vec::new();
    for event_id in body.event_ids() {
        if state
            .sales
            .rooms()
            .active(&state.db, event_id, state.clock.now())
            .await?
            .is_some()
        {
            queued.push(event_id);
        }
    }
    body.hide_ticket_type_ids(&queued);
    Ok(Json(body))
}

/// `GET /api/v1/events/{id}`: a published event. An event behind a
/// waiting room shows its ticket type ids only with a valid pass (the
/// `pass` query parameter), like its page.
#[utoipa::path(
    get,
    path = "/api/v1/events/{id}",
    tag = "public",
    summary = "Read a published event",
    params(
        ("id" = uuid::Uuid, Path, description = "The event's id"),
        ("pass" = Option<String>, Query, description = "A waiting-room pass: an event behind a waiting room shows its ticket type ids only with a valid one"),
    ),
    responses(
        (status = 200, description = "The event with its ticket types", body = EventBody),
        (status = 404, description = "No published event has this id", body = crate::web::error::ErrorBody),
    ),
)]
pub async fn get_event(
    State(state): State<AppState>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<EventBody>> {
    let event_id: EventId = parse_id(&id)?;
    let detail = state
        .events
        .published(&state.db, &state.sales, event_id)
        .await?;
    let mut body = EventBody::from(db::events::EventDetail::clone(&detail));
    if state
        .sales
        .rooms()
        .active(&state.db, event_id, state.clock.now())
        .await?
        .is_some()
    {
        let pass = form_urlencoded::parse(query.unwrap_or_default().as_bytes())
            .find(|(key, _)| key == "pass")
            .map(|(_, value)| value.into_owned());
        let rooms = state.sales.rooms();
        if rooms
            .key()
            .check_pass(event_id, pass.as_deref(), state.clock.now())
            .is_err()
        {
            body.hide_ticket_type_ids();
        }
    }
    Ok(Json(body))
}

/// `POST /api/v1/orders` → 201 with a new order and, this once, its cancel
/// secret and cancel URL; 200 with the same order (no secret) when the
/// buyer's idempotency key was already used for this purchase.
#[utoipa::path(
    post,
    path = "/api/v1/orders",
    tag = "public",
    summary = "Buy tickets",
    description = "Idempotent per `idempotency_key`: sending the same purchase again answers 200 with the same order.",
    request_body = CreateOrder,
    responses(
        (status = 201, description = "A new order, with its cancel secret and cancel URL (shown this once)", body = OrderBody),
        (status = 200, description = "The order this idempotency key already made", body = OrderBody),
        (status = 400, description = "Not a JSON body", body = crate::web::error::ErrorBody),
        (status = 403, description = "The sale is not open (`sale_not_open`, `sale_closed`)", body = crate::web::error::ErrorBody),
        (status = 404, description = "No ticket type on sale has this id", body = crate::web::error::ErrorBody),
        (status = 409, description = "Sold out, not enough left, a limit per order or buyer, or the key used for another purchase", body = crate::web::error::ErrorBody),
        (status = 422, description = "A field is invalid; `field` names it", body = crate::web::error::ErrorBody),
        (status = 429, description = "Too many purchases from this address or for this email", body = crate::web::error::ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
)]
pub async fn create_order(
    State(state): State<AppState>,
    connect: Option<Extension<ConnectInfo<SocketAddr>>>,
    ApiJson(body): ApiJson<CreateOrder>,
) -> ApiResult<(StatusCode, Json<OrderBody>)> {
    let request = PurchaseRequest {
        event_id: None,
        ticket_type_id: body.ticket_type_id,
        quantity: Quantity::new(body.quantity).for_field("quantity")?,
        email: Email::from_input(body.email).for_field("email")?,
        idempotency_key: IdempotencyKey::from_input(body.idempotency_key)
            .for_field("idempotency_key")?,
        pass: body.pass,
        queue_entry: None,
        presale_code: optional_code(body.presale_code.as_deref().unwrap_or_default())?,
        client: crate::web::queue::client(connect).map(ClientKey::of),
    };
    Ok(match state.purchase(&request).await? {
        Purchase::Created {
            order,
            cancel_secret,
        } => (
            StatusCode::CREATED,
            Json(OrderBody::from(order).with_secret(&cancel_secret)),
        ),
        Purchase::Replayed(order) => (StatusCode::OK, Json(order.into())),
    })
}

/// `GET /api/v1/orders/{id}`.
#[utoipa::path(
    get,
    path = "/api/v1/orders/{id}",
    tag = "public",
    summary = "Read an order",
    params(("id" = uuid::Uuid, Path, description = "The order's id")),
    responses(
        (status = 200, description = "The order (never its cancel secret)", body = OrderBody),
        (status = 404, description = "No order has this id", body = crate::web::error::ErrorBody),
    ),
)]
pub async fn get_order(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<OrderBody>> {
    let order = sale::find_by_id(&state.db, parse_id(&id)?)
        .await?
        .ok_or(AppError::NotFound)?;
    Ok(Json(order.into()))
}

/// `POST /api/v1/orders/{id}/cancel?s={cancel_secret}`.
#[utoipa::path(
    post,
    path = "/api/v1/orders/{id}/cancel",
    tag = "public",
    summary = "Cancel an order with its cancel secret",
    params(
        ("id" = uuid::Uuid, Path, description = "The order's id"),
        ("s" = String, Query, description = "The cancel secret the creating answer carried"),
    ),
    responses(
        (status = 200, description = "The cancelled order", body = OrderBody),
        (status = 403, description = "The secret is missing or not this order's", body = crate::web::error::ErrorBody),
        (status = 404, description = "No order has this id", body = crate::web::error::ErrorBody),
        (status = 409, description = "Already cancelled, or the event has started", body = crate::web::error::ErrorBody),
    ),
)]
pub async fn cancel_order(
    State(state): State<AppState>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<OrderBody>> {
    let secret = form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .find(|(key, _)| key == "s")
        .and_then(|(_, value)| CancelSecret::parse(&value));
    let order = sale::cancel(
        &state.db,
        state.clock.now(),
        parse_id(&id)?,
        secret.as_ref(),
    )
    .await?;
    state.events.forget_ticket_type(order.ticket_type_id).await;
    Ok(Json(order.into()))
}
