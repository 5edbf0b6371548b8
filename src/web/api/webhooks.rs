//! The webhook API under `/api/v1/organizer/webhooks` (issues 10 and 11):
//! endpoints' CRUD, their delivery log, redelivery and secret rotation.
//! Behind the token check and the per-account rate limit (`web::mod`); every
//! query is scoped to the token's organizer, so another organizer's
//! endpoint is "not found".

use axum::{
    Extension, Json, Router,
    extract::{Path, RawQuery, State},
    http::StatusCode,
    routing::{get, post},
};

use super::webhooks_wire::{
    CreateWebhook, DeliveryList, PageQuery, RedeliverBody, UpdateWebhook, WebhookBody, WebhookList,
};
use crate::{
    auth::CurrentOrganizer,
    db::webhooks as store,
    domain::{DeliveryId, WebhookId},
    web::{
        AppState,
        error::ApiError,
        extract::{ApiJson, parse_id},
    },
    webhooks::endpoints,
};

type ApiResult<T> = Result<T, ApiError>;

use crate::web::error::ErrorBody;

/// The routes; the caller puts them behind the token check.
pub fn routes() -> Router<AppState> {
    const ONE: &str = "/api/v1/organizer/webhooks/{id}";
    Router::new()
        .route("/api/v1/organizer/webhooks", get(list).post(create))
        .route(ONE, get(show).patch(update).delete(delete))
        .route(&format!("{ONE}/rotate-secret"), post(rotate_secret))
        .route(&format!("{ONE}/deliveries"), get(deliveries))
        .route(
            &format!("{ONE}/deliveries/{{delivery}}/redeliver"),
            post(redeliver),
        )
}

/// `GET /api/v1/organizer/webhooks?limit=&after=`.
#[utoipa::path(
    get,
    path = "/api/v1/organizer/webhooks",
    tag = "webhooks",
    summary = "List your webhook endpoints",
    params(
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 100, description = "Page size (default 20)"),
        ("after" = Option<String>, Query, description = "The `next` of the previous page"),
    ),
    responses(
        (status = 200, description = "A page of endpoints (no secrets)", body = WebhookList),
        (status = 422, description = "A query parameter is invalid or unknown; `field` names it", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(super) async fn list(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<WebhookList>> {
    let page = PageQuery::parse(query.as_deref())?;
    let mut rows = store::list(&state.db, organizer.id, page.after, page.limit + 1).await?;
    let next = (rows.len() as i64 > page.limit).then(|| {
        rows.truncate(page.limit as usize);
        rows.last().map(|e| e.seq.to_string()).unwrap_or_default()
    });
    Ok(Json(WebhookList {
        webhooks: rows.into_iter().map(Into::into).collect(),
        next,
    }))
}

/// `POST /api/v1/organizer/webhooks` → 201 with the secret, this once.
#[utoipa::path(
    post,
    path = "/api/v1/organizer/webhooks",
    tag = "webhooks",
    summary = "Register a webhook endpoint",
    description = "The answer carries the signing secret (`whsec_...`), shown this once.",
    request_body = CreateWebhook,
    responses(
        (status = 201, description = "The endpoint, with its secret", body = WebhookBody),
        (status = 400, description = "Not a JSON object", body = ErrorBody),
        (status = 422, description = "A field is invalid (a private address, an unknown event type, ...); `field` names it", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(super) async fn create(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    ApiJson(body): ApiJson<CreateWebhook>,
) -> ApiResult<(StatusCode, Json<WebhookBody>)> {
    let (endpoint, secret) = endpoints::create(
        &state.db,
        organizer.id,
        &body.into_input(),
        state.webhooks_allow_private,
    )
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(WebhookBody::from(endpoint).with_secret(secret)),
    ))
}

#[utoipa::path(
    get,
    path = "/api/v1/organizer/webhooks/{id}",
    tag = "webhooks",
    summary = "Read one of your webhook endpoints",
    params(("id" = uuid::Uuid, Path, description = "The endpoint's id")),
    responses(
        (status = 200, description = "The endpoint (no secret)", body = WebhookBody),
        (status = 404, description = "You have no endpoint with this id", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(super) async fn show(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> ApiResult<Json<WebhookBody>> {
    let endpoint = store::find_owned(&state.db, organizer.id, parse_id(&id)?).await?;
    Ok(Json(endpoint.into()))
}

/// `PATCH .../{id}`: url, description, event_types, enabled.
#[utoipa::path(
    patch,
    path = "/api/v1/organizer/webhooks/{id}",
    tag = "webhooks",
    summary = "Change a webhook endpoint",
    description = "Absent fields stay. `enabled: true` re-enables an endpoint and clears its disabled reason.",
    params(("id" = uuid::Uuid, Path, description = "The endpoint's id")),
    request_body = UpdateWebhook,
    responses(
        (status = 200, description = "The endpoint as changed", body = WebhookBody),
        (status = 400, description = "Not a JSON object", body = ErrorBody),
        (status = 404, description = "You have no endpoint with this id", body = ErrorBody),
        (status = 422, description = "A field is invalid; `field` names it", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(super) async fn update(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<UpdateWebhook>,
) -> ApiResult<Json<WebhookBody>> {
    let endpoint = endpoints::update(
        &state.db,
        organizer.id,
        parse_id(&id)?,
        &body.into_patch(),
        state.webhooks_allow_private,
    )
    .await?;
    Ok(Json(endpoint.into()))
}

/// `DELETE .../{id}` → 204, with its deliveries and their log.
#[utoipa::path(
    delete,
    path = "/api/v1/organizer/webhooks/{id}",
    tag = "webhooks",
    summary = "Delete a webhook endpoint, with its deliveries and their log",
    params(("id" = uuid::Uuid, Path, description = "The endpoint's id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "You have no endpoint with this id", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(super) async fn delete(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    store::delete(&state.db, organizer.id, parse_id(&id)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST .../{id}/rotate-secret`: the endpoint with its new secret, once.
#[utoipa::path(
    post,
    path = "/api/v1/organizer/webhooks/{id}/rotate-secret",
    tag = "webhooks",
    summary = "Give a webhook endpoint a new signing secret",
    description = "The answer carries the new secret, shown this once; the old one signs nothing more.",
    params(("id" = uuid::Uuid, Path, description = "The endpoint's id")),
    responses(
        (status = 200, description = "The endpoint, with its new secret", body = WebhookBody),
        (status = 404, description = "You have no endpoint with this id", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(super) async fn rotate_secret(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> ApiResult<Json<WebhookBody>> {
    let id: WebhookId = parse_id(&id)?;
    let secret = endpoints::rotate_secret(&state.db, organizer.id, id).await?;
    let endpoint = store::find_owned(&state.db, organizer.id, id).await?;
    Ok(Json(WebhookBody::from(endpoint).with_secret(secret)))
}

/// `GET .../{id}/deliveries?limit=&after=`: newest first, with attempts.
#[utoipa::path(
    get,
    path = "/api/v1/organizer/webhooks/{id}/deliveries",
    tag = "webhooks",
    summary = "A webhook endpoint's delivery log",
    description = "Newest first; each delivery with its attempts (status, latency, response excerpt).",
    params(
        ("id" = uuid::Uuid, Path, description = "The endpoint's id"),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 100, description = "Page size (default 20)"),
        ("after" = Option<String>, Query, description = "The `next` of the previous page"),
    ),
    responses(
        (status = 200, description = "A page of deliveries", body = DeliveryList),
        (status = 404, description = "You have no endpoint with this id", body = ErrorBody),
        (status = 422, description = "A query parameter is invalid or unknown; `field` names it", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(super) async fn deliveries(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<DeliveryList>> {
    let endpoint = store::find_owned(&state.db, organizer.id, parse_id(&id)?).await?;
    let page = PageQuery::parse(query.as_deref())?;
    let mut rows = store::deliveries(&state.db, endpoint.id, page.after, page.limit + 1).await?;
    let next = (rows.len() as i64 > page.limit).then(|| {
        rows.truncate(page.limit as usize);
        rows.last().map(|d| d.seq.to_string()).unwrap_or_default()
    });
    Ok(Json(DeliveryList {
        deliveries: rows.into_iter().map(Into::into).collect(),
        next,
    }))
}

/// `POST .../{id}/deliveries/{delivery}/redeliver` → 202: sent again soon,
/// with the same `webhook-id`.
#[utoipa::path(
    post,
    path = "/api/v1/organizer/webhooks/{id}/deliveries/{delivery}/redeliver",
    tag = "webhooks",
    summary = "Send a delivery again",
    description = "Queued to be sent at once, with the same `webhook-id`.",
    params(
        ("id" = uuid::Uuid, Path, description = "The endpoint's id"),
        ("delivery" = uuid::Uuid, Path, description = "The delivery's id"),
    ),
    responses(
        (status = 202, description = "Queued", body = RedeliverBody),
        (status = 404, description = "You have no such endpoint or delivery", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(super) async fn redeliver(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path((id, delivery)): Path<(String, String)>,
) -> ApiResult<(StatusCode, Json<RedeliverBody>)> {
    let delivery: DeliveryId = parse_id(&delivery)?;
    let webhook_id = store::redeliver(&state.db, organizer.id, parse_id(&id)?, delivery).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(RedeliverBody {
            id: delivery,
            webhook_id,
            status: "pending",
        }),
    ))
}
