//! HTTP: the router, thin handlers, views and the JSON API.

mod api;
mod assets;
mod extract;
mod organizer;
mod pages;
pub mod views;

use std::{sync::Arc, time::Duration};

use axum::{
    Router,
    error_handling::HandleErrorLayer,
    extract::{DefaultBodyLimit, State},
    http::{HeaderName, HeaderValue, Request, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use sqlx::PgPool;
use tower::ServiceBuilder;
use tower_http::{
    compression::CompressionLayer,
    request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer},
    set_header::SetResponseHeaderLayer,
    timeout::TimeoutLayer,
    trace::TraceLayer,
};

use crate::{
    clock::{Clock, SystemClock},
    error::{ApiError, AppError},
};

/// Largest request body accepted anywhere; forms and JSON are small.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_in_flight: usize,
    pub request_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_in_flight: 2048,
            request_timeout: Duration::from_secs(15),
        }
    }
}

#[derive(Clone)]
pub struct AppState {
    pub db: PgPool,
    pub clock: Arc<dyn Clock>,
    pub limits: Limits,
}

impl AppState {
    pub fn new(db: PgPool) -> Self {
        Self {
            db,
            clock: Arc::new(SystemClock),
            limits: Limits::default(),
        }
    }

    pub fn with_clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }
}

pub fn app(state: AppState) -> Router {
    let limits = state.limits;
    let buyer = Router::new()
        .route("/", get(pages::index))
        .route("/events/{id}", get(pages::event))
        .route("/events/{id}/orders", post(pages::buy))
        .route("/orders/{id}", get(pages::order))
        .route("/orders/{id}/cancel", post(pages::cancel));
    // Every organizer page lives under /organizer and every organizer API
    // route under /api/v1/organizer, so one layer can protect them later.
    let organizer = Router::new()
        .route("/organizer", get(organizer::index))
        .route("/organizer/events", post(organizer::create))
        .route("/organizer/events/new", get(organizer::new_form))
        .route(
            "/organizer/events/{id}",
            get(organizer::edit_form).post(organizer::update),
        )
        .route("/organizer/events/{id}/publish", post(organizer::publish))
        .route(
            "/organizer/events/{id}/unpublish",
            post(organizer::unpublish),
        );
    let api = Router::new()
        .route("/api/v1/events", get(api::list_events))
        .route("/api/v1/events/{id}", get(api::get_event))
        .route("/api/v1/orders", post(api::create_order))
        .route("/api/v1/orders/{id}", get(api::get_order))
        .route("/api/v1/orders/{id}/cancel", post(api::cancel_order))
        .route("/api/v1/organizer/events", post(api::create_event));

    let security_headers = ServiceBuilder::new()
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_FRAME_OPTIONS,
            HeaderValue::from_static("DENY"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::REFERRER_POLICY,
            HeaderValue::from_static("same-origin"),
        ));

    let request_id = HeaderName::from_static("x-request-id");
    Router::new()
        .merge(buyer)
        .merge(organizer)
        .merge(api)
        .route("/static/{file}", get(assets::serve))
        .route("/healthz", get(health))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(
            ServiceBuilder::new()
                .layer(SetRequestIdLayer::new(request_id.clone(), MakeRequestUuid))
                .layer(TraceLayer::new_for_http().make_span_with(|request: &Request<_>| {
                    let id = request
                        .headers()
                        .get("x-request-id")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("");
                    tracing::info_span!("request", method = %request.method(), path = %request.uri().path(), id)
                }))
                .layer(PropagateRequestIdLayer::new(request_id))
                .layer(security_headers)
                .layer(CompressionLayer::new())
                // Overload: refuse at once with 503 rather than queue unboundedly.
                .layer(HandleErrorLayer::new(overloaded))
                .load_shed()
                .concurrency_limit(limits.max_in_flight)
                .layer(TimeoutLayer::with_status_code(
                    StatusCode::SERVICE_UNAVAILABLE,
                    limits.request_timeout,
                )),
        )
}

async fn overloaded(_: tower::BoxError) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, "1")],
        "Stampede is very busy right now; please try again in a moment.",
    )
        .into_response()
}

async fn health(State(state): State<AppState>) -> Result<&'static str, AppError> {
    sqlx::query_scalar!("SELECT 1 AS \"one!\"")
        .fetch_one(&state.db)
        .await?;
    Ok("ok")
}

/// API paths answer in JSON, pages in HTML.
fn respond(uri: &axum::http::Uri, err: AppError) -> Response {
    if uri.path().starts_with("/api/") {
        ApiError(err).into_response()
    } else {
        err.into_response()
    }
}

async fn not_found(uri: axum::http::Uri) -> Response {
    respond(&uri, AppError::NotFound)
}

async fn method_not_allowed(uri: axum::http::Uri) -> Response {
    respond(&uri, AppError::MethodNotAllowed)
}
