//! JSON API under /api/v1. Errors: `{"error": {"code", "message", "field"}}`.

use axum::{
    Extension, Json,
    extract::{Path, RawQuery, State},
    http::StatusCode,
};

pub mod checkin;
mod organizer;
mod organizer_wire;
mod rate_limit;
mod waiting_room;
mod wire;

pub use organizer::routes as organizer_routes;
pub use rate_limit::{ApiRateLimit, DEFAULT_API_REQUESTS_PER_MINUTE, per_token};

use wire::{CreateEvent, CreateOrder, EventBody, EventList, EventPageBody, OrderBody};

use super::{
    AppState,
    error::ApiError,
    extract::{ApiJson, parse_id},
    pages::public_page,
};
use crate::{
    auth::CurrentOrganizer,
    db,
    domain::{CancelSecret, Email, EventId, EventListQuery, ForField, IdempotencyKey, Quantity},
    error::AppError,
    sale::{self, Purchase, PurchaseRequest},
};

type ApiResult<T> = Result<T, ApiError>;

/// `POST /api/v1/organizer/events` → 201 with the event and its ticket types.
pub async fn create_event(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    ApiJson(body): ApiJson<CreateEvent>,
) -> ApiResult<(StatusCode, Json<EventBody>)> {
    let new = body.into_input().parse()?;
    let id = db::events::create(&state.db, organizer.id, &state.quotas, &new).await?;
    let detail = db::events::find(&state.db, id)
        .await?
        .ok_or(AppError::NotFound)?;
    Ok((StatusCode::CREATED, Json(detail.into())))
}

/// `GET /api/v1/organizer/events[?limit=&after=]`: the caller's own
/// events, any status, a page at a time; `next` is the cursor of the next.
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

/// An event behind a waiting room shows its ticket type ids only with a
/// valid pass (the `pass` query parameter), like its page.
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
pub async fn create_order(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<CreateOrder>,
) -> ApiResult<(StatusCode, Json<OrderBody>)> {
    let request = PurchaseRequest {
        event_id: None,
        ticket_type_id: body.ticket_type_id,
        quantity: Quantity::new(body.quantity).for_field("quantity")?,
        email: Email::parse(&body.email).for_field("email")?,
        idempotency_key: IdempotencyKey::parse(&body.idempotency_key)
            .for_field("idempotency_key")?,
        pass: body.pass,
        queue_entry: None,
    };
    state.purchase_limits.check_email(&request.email)?;
    Ok(
        match state.sales.purchase(state.clock.now(), &request).await? {
            Purchase::Created {
                order,
                cancel_secret,
            } => (
                StatusCode::CREATED,
                Json(OrderBody::from(order).with_secret(&cancel_secret)),
            ),
            Purchase::Replayed(order) => (StatusCode::OK, Json(order.into())),
        },
    )
}

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
