//! JSON API under /api/v1. Errors: `{"error": {"code", "message", "field"}}`.

use axum::{
    Extension, Json,
    extract::{Path, State},
    http::StatusCode,
};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    AppState,
    extract::{ApiJson, parse_id},
};
use crate::{
    auth::CurrentOrganizer,
    db::{self, events::EventDetail},
    domain::{Email, EventInput, ForField, IdempotencyKey, Quantity, TicketTypeInput},
    error::{ApiError, AppError},
    sale::{self, Order, Purchase, PurchaseRequest},
};

type ApiResult<T> = Result<T, ApiError>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateEvent {
    title: String,
    #[serde(default)]
    description: String,
    venue: String,
    starts_at: String,
    sale_opens_at: String,
    #[serde(default)]
    sale_closes_at: Option<String>,
    #[serde(default)]
    status: Option<String>,
    ticket_types: Vec<CreateTicketType>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateTicketType {
    name: String,
    price_minor: i64,
    currency: String,
    capacity: i64,
    #[serde(default)]
    max_per_order: Option<i64>,
    #[serde(default)]
    max_per_buyer: Option<i64>,
}

impl CreateEvent {
    fn into_input(self) -> EventInput {
        let number = |n: Option<i64>| n.map(|n| n.to_string()).unwrap_or_default();
        EventInput {
            title: self.title,
            description: self.description,
            venue: self.venue,
            starts_at: self.starts_at,
            sale_opens_at: self.sale_opens_at,
            sale_closes_at: self.sale_closes_at.unwrap_or_default(),
            status: self.status.unwrap_or_default(),
            ticket_types: self
                .ticket_types
                .into_iter()
                .map(|tt| TicketTypeInput {
                    id: None,
                    name: tt.name,
                    price: tt.price_minor.to_string(),
                    price_is_minor: true,
                    currency: tt.currency,
                    capacity: tt.capacity.to_string(),
                    max_per_order: number(tt.max_per_order),
                    max_per_buyer: number(tt.max_per_buyer),
                })
                .collect(),
        }
    }
}

/// `POST /api/v1/organizer/events` → 201 with the event and its ticket types.
pub async fn create_event(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    ApiJson(body): ApiJson<CreateEvent>,
) -> ApiResult<(StatusCode, Json<EventDetail>)> {
    let new = body.into_input().parse()?;
    let id = db::events::create(&state.db, organizer.id, &new).await?;
    let detail = db::events::find(&state.db, id)
        .await?
        .ok_or(AppError::NotFound)?;
    Ok((StatusCode::CREATED, Json(detail)))
}

/// `GET /api/v1/organizer/events`: the caller's own events, any status.
pub async fn list_own_events(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
) -> ApiResult<Json<Value>> {
    let events = db::events::list_details_for_organizer(&state.db, organizer.id).await?;
    Ok(Json(json!({ "events": events })))
}

pub async fn list_events(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    let events = db::events::list_published_details(&state.db, state.clock.now()).await?;
    Ok(Json(json!({ "events": events })))
}

pub async fn get_event(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<EventDetail>> {
    Ok(Json(
        db::events::find_published(&state.db, parse_id(&id)?).await?,
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateOrder {
    ticket_type_id: uuid::Uuid,
    quantity: i64,
    email: String,
    idempotency_key: String,
}

/// `POST /api/v1/orders` → 201 with a new order, 200 with the same order
/// when the buyer's idempotency key was already used for this purchase.
pub async fn create_order(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<CreateOrder>,
) -> ApiResult<(StatusCode, Json<Order>)> {
    let request = PurchaseRequest {
        event_id: None,
        ticket_type_id: body.ticket_type_id,
        quantity: Quantity::new(body.quantity).for_field("quantity")?,
        email: Email::parse(&body.email).for_field("email")?,
        idempotency_key: IdempotencyKey::parse(&body.idempotency_key)
            .for_field("idempotency_key")?,
    };
    Ok(
        match sale::purchase(&state.db, state.clock.now(), &request).await? {
            Purchase::Created(order) => (StatusCode::CREATED, Json(order)),
            Purchase::Replayed(order) => (StatusCode::OK, Json(order)),
        },
    )
}

pub async fn get_order(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Order>> {
    let order = sale::find_by_id(&state.db, parse_id(&id)?)
        .await?
        .ok_or(AppError::NotFound)?;
    Ok(Json(order))
}

pub async fn cancel_order(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Order>> {
    Ok(Json(sale::cancel(&state.db, parse_id(&id)?).await?))
}
