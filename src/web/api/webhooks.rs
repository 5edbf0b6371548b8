//! The webhook API under `/api/v1/organizer/webhooks` (issues 10 and 11):
//! endpoints' CRUD, their delivery log, redelivery and secret rotation.
//! Behind the token check and the per-token rate limit (`web::mod`); every
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
async fn list(
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
async fn create(
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

async fn show(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> ApiResult<Json<WebhookBody>> {
    let endpoint = store::find_owned(&state.db, organizer.id, parse_id(&id)?).await?;
    Ok(Json(endpoint.into()))
}

/// `PATCH .../{id}`: url, description, event_types, enabled.
async fn update(
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
async fn delete(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    store::delete(&state.db, organizer.id, parse_id(&id)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST .../{id}/rotate-secret`: the endpoint with its new secret, once.
async fn rotate_secret(
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
async fn deliveries(
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
async fn redeliver(
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
