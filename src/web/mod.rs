//! HTTP: the router, thin handlers, views and the JSON API.

mod account;
pub mod admission;
mod api;
mod assets;
mod auth;
pub mod csrf;
mod dashboard;
pub mod error;
mod export;
mod extract;
pub mod list_cache;
mod organizer;
mod pages;
pub mod per_client;
mod state;
pub mod views;

pub use error::ApiError;
pub use state::{AppState, DEFAULT_LIST_CACHE_TTL, Limits, session_store};

use axum::{
    Router,
    extract::DefaultBodyLimit,
    http::{HeaderName, HeaderValue, Request, StatusCode, header},
    middleware,
    response::IntoResponse,
    routing::{get, post},
};
use tower::ServiceBuilder;
use tower_http::{
    compression::CompressionLayer,
    csrf::CsrfLayer,
    request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer},
    set_header::SetResponseHeaderLayer,
    timeout::TimeoutLayer,
    trace::TraceLayer,
};
use tower_sessions::{Expiry, SessionManagerLayer, cookie::SameSite};

use crate::error::AppError;

/// Largest request body accepted anywhere; forms and JSON are small.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

pub fn app(state: AppState) -> Router {
    let limits = state.limits;
    let buyer = Router::new()
        .route("/", get(pages::index))
        .route("/events/{id}", get(pages::event))
        .route("/events/{id}/orders", post(pages::buy))
        .route("/orders/{id}", get(pages::order))
        .route("/orders/{id}/cancel", post(pages::cancel));

    // Log-in and sign-up attempts (each runs the deliberately slow password
    // hash) are limited per client address: the peer address, since no
    // proxy header is trusted. Each route gets its own budget.
    let limited = |router: Router<AppState>| rate_limited(router, limits);
    let account = Router::new()
        .route("/signup", get(account::sign_up_form))
        .route("/login", get(account::log_in_form))
        .route("/logout", post(account::log_out))
        .merge(limited(
            Router::new().route("/login", post(account::log_in)),
        ))
        .merge(limited(
            Router::new().route("/signup", post(account::sign_up)),
        ));

    // Every organizer page lives under /organizer and every organizer API
    // route under /api/v1/organizer; these two layers protect all of them.
    let organizer = Router::new()
        .route("/organizer", get(organizer::index))
        .route("/organizer/events", post(organizer::create))
        .route("/organizer/events/new", get(organizer::new_form))
        .route("/organizer/events/{id}", get(dashboard::show))
        .route(
            "/organizer/events/{id}/orders.csv",
            get(dashboard::orders_csv),
        )
        .route(
            "/organizer/events/{id}/edit",
            get(organizer::edit_form).post(organizer::update),
        )
        .route("/organizer/events/{id}/publish", post(organizer::publish))
        .route(
            "/organizer/events/{id}/unpublish",
            post(organizer::unpublish),
        )
        .route("/organizer/events/{id}/cancel", post(organizer::cancel))
        .route("/organizer/settings", get(account::settings))
        .route("/organizer/settings/tokens", post(account::create_token))
        .route(
            "/organizer/settings/tokens/{id}/revoke",
            post(account::revoke_token),
        )
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_session,
        ));
    let organizer_api = Router::new()
        .route(
            "/api/v1/organizer/events",
            post(api::create_event).get(api::list_own_events),
        )
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ));
    let api = Router::new()
        .route("/api/v1/events", get(api::list_events))
        .route("/api/v1/events/{id}", get(api::get_event))
        .route("/api/v1/orders", post(api::create_order))
        .route("/api/v1/orders/{id}", get(api::get_order))
        .route("/api/v1/orders/{id}/cancel", post(api::cancel_order))
        .merge(organizer_api);

    let sessions = SessionManagerLayer::new(session_store(state.db.clone()))
        .with_name("stampede_session")
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_secure(state.secure_cookies)
        .with_expiry(Expiry::OnInactivity(time::Duration::days(7)));

    let security_headers = ServiceBuilder::new()
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(
                "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
            ),
        ))
        // Pages carry order codes, tokens and buyer emails: no shared or
        // stored copies. Static assets set their own long-lived policy.
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-store"),
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
        .merge(account)
        .merge(organizer)
        .merge(api)
        .route("/static/{file}", get(assets::serve))
        .route("/healthz", get(health))
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), csrf::protect))
        .layer(sessions)
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
                // Overload: refuse at once with 503 rather than queue
                // unboundedly; slow bodies and greedy clients hold no budget.
                .layer(middleware::from_fn_with_state(
                    admission::Admission::new(&limits),
                    admission::admit,
                ))
                .layer(TimeoutLayer::with_status_code(
                    StatusCode::SERVICE_UNAVAILABLE,
                    limits.request_timeout,
                ))
                .layer(CsrfLayer::new()),
        )
}

/// A per-client-address limit on a router's routes: `login_burst` at once,
/// then one per `login_period`; refusals say how long to wait.
fn rate_limited(router: Router<AppState>, limits: Limits) -> Router<AppState> {
    let config = tower_governor::governor::GovernorConfigBuilder::default()
        .period(limits.login_period)
        .burst_size(limits.login_burst)
        .finish();
    let Some(config) = config else {
        return router;
    };
    router.layer(
        tower_governor::GovernorLayer::new(config).error_handler(|err| {
            let retry_after_secs = match err {
                tower_governor::GovernorError::TooManyRequests { wait_time, .. } => {
                    wait_time.max(1)
                }
                _ => 1,
            };
            AppError::TooManyRequests { retry_after_secs }.into_response()
        }),
    )
}

/// Liveness: the process serves. It touches neither the database pool nor
/// any budget, so it answers while a sale holds them all.
async fn health() -> &'static str {
    "ok"
}
