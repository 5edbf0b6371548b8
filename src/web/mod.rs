//! HTTP: the router, thin handlers, views and the JSON API.

mod account;
pub mod admission;
mod api;
mod assets;
mod auth;
pub mod csrf;
mod dashboard;
mod door;
pub mod error;
pub mod event_cache;
mod export;
mod extract;
pub mod list_cache;
mod organizer;
mod pages;
pub mod per_client;
mod presale;
pub mod purchase_limits;
mod queue;
mod state;
mod telemetry;
pub mod views;
mod waitlist;
mod webhooks;

pub use error::ApiError;
pub use state::{AppState, DEFAULT_LIST_CACHE_TTL, Limits, session_store};

use axum::{
    Router,
    body::Body,
    extract::{DefaultBodyLimit, State},
    http::{HeaderName, HeaderValue, Request, header},
    middleware,
    response::IntoResponse,
    routing::{MethodRouter, get, post},
};
use std::time::Duration;

use tower::ServiceBuilder;
use tower_http::{
    compression::{CompressionBody, CompressionLayer},
    csrf::CsrfLayer,
    request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer},
    trace::TraceLayer,
};
use tower_sessions::{Expiry, SessionManagerLayer, cookie::SameSite};

use crate::error::AppError;

/// Largest request body accepted anywhere; forms and JSON are small.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Install the process's metrics recorder. Call it before anything that
/// counts: the sale's listeners and the gate's warm-up start counting when
/// the sale is made, before the app is; counts made before it are lost.
pub fn install_metrics() {
    telemetry::recorder();
}

pub fn app(state: AppState) -> Router {
    let limits = state.limits;
    telemetry::recorder();
    let buyer = Router::new()
        .route("/", get(pages::index))
        .route("/events/{id}", get(pages::event))
        .route(
            "/events/{id}/orders",
            limited_per_ip(post(pages::buy), &state),
        )
        .route(
            "/events/{id}/queue",
            get(queue::position_page).post(queue::join),
        )
        .route("/events/{id}/queue/prequeue.json", get(queue::prequeue))
        .route("/orders/{id}", get(pages::order))
        .route("/orders/{id}/cancel", post(pages::cancel))
        .route(
            "/orders/{id}/confirm",
            get(pages::confirm_page).post(pages::confirm),
        )
        .route(
            "/events/{id}/waiting-list",
            limited_per_ip(post(waitlist::join), &state),
        )
        .route("/waiting-list/{id}", get(waitlist::show))
        .route(
            "/waiting-list/{id}/confirm",
            get(waitlist::confirm_page).post(waitlist::confirm),
        )
        .route("/waiting-list/{id}/leave", post(waitlist::leave))
        // Door staff, through a staff link (no account).
        .route("/door", get(door::scanner).post(door::scan));

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
        .route(
            "/organizer/events/{id}/waiting-room",
            post(organizer::update_room),
        )
        .route(
            "/organizer/events/{id}/waiting-room/admission",
            post(dashboard::set_admission),
        )
        .route(
            "/organizer/events/{id}/waiting-room.json",
            get(dashboard::room_json),
        )
        .route(
            "/organizer/events/{id}/codes",
            get(presale::show).post(presale::create),
        )
        .route("/organizer/events/{id}/codes.csv", get(presale::export))
        .route(
            "/organizer/events/{id}/waiting-list",
            get(waitlist::organizer_show),
        )
        .route(
            "/organizer/events/{id}/waiting-list/offers",
            post(waitlist::set_offers),
        )
        .route("/organizer/events/{id}/publish", post(organizer::publish))
        .route(
            "/organizer/events/{id}/unpublish",
            post(organizer::unpublish),
        )
        .route("/organizer/events/{id}/cancel", post(organizer::cancel))
        .route("/organizer/events/{id}/door-links", post(door::create_link))
        .route(
            "/organizer/events/{id}/door-links/{link}/revoke",
            post(door::revoke_link),
        )
        .route("/organizer/settings", get(account::settings))
        .route("/organizer/settings/tokens", post(account::create_token))
        .route(
            "/organizer/settings/tokens/{id}/revoke",
            post(account::revoke_token),
        )
        .route("/organizer/settings/webhooks", post(webhooks::create))
        .route("/organizer/settings/webhooks/{id}", get(webhooks::show))
        .route(
            "/organizer/settings/webhooks/{id}/enable",
            post(webhooks::enable),
        )
        .route(
            "/organizer/settings/webhooks/{id}/disable",
            post(webhooks::disable),
        )
        .route(
            "/organizer/settings/webhooks/{id}/rotate-secret",
            post(webhooks::rotate_secret),
        )
        .route(
            "/organizer/settings/webhooks/{id}/delete",
            post(webhooks::delete),
        )
        .route(
            "/organizer/settings/webhooks/{id}/deliveries/{delivery}/redeliver",
            post(webhooks::redeliver),
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
        .route(
            "/api/v1/organizer/events/{id}/check-ins",
            post(api::checkin::redeem).get(api::checkin::list_check_ins),
        )
        .route(
            "/api/v1/organizer/events/{id}/tickets",
            get(api::checkin::search_tickets),
        )
        .merge(api::organizer_routes())
        .merge(api::webhook_routes())
        // Inside the token check: the rate limit counts per account.
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            api::per_account,
        ))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ));
    let api = Router::new()
        // The document of every route below, and the page rendering it.
        .route("/api/v1/openapi.json", get(api::doc::openapi_json))
        .route("/api/v1/docs", get(api::doc::reference_page))
        .route("/api/v1/events", get(api::list_events))
        .route("/api/v1/events/{id}", get(api::get_event))
        .route(
            "/api/v1/events/{id}/queue",
            get(queue::api_position).post(queue::api_join),
        )
        .route(
            "/api/v1/events/{id}/queue/challenge",
            get(queue::api_challenge),
        )
        .route(
            "/api/v1/orders",
            limited_per_ip(post(api::create_order), &state),
        )
        .route("/api/v1/orders/{id}", get(api::get_order))
        .route("/api/v1/orders/{id}/cancel", post(api::cancel_order))
        .merge(organizer_api);

    let sessions = SessionManagerLayer::new(session_store(state.db.clone()))
        .with_name("stampede_session")
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_secure(state.secure_cookies)
        .with_expiry(Expiry::OnInactivity(time::Duration::days(7)));

    let request_id = HeaderName::from_static("x-request-id");
    Router::new()
        .merge(buyer)
        .merge(account)
        .merge(organizer)
        .merge(api)
        .route("/static/{file}", get(assets::serve))
        .route("/healthz", get(health))
        .route("/readyz", get(ready))
        .route("/metrics", get(telemetry::render))
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed)
        .route_layer(telemetry::TrackLayer)
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
                .map_response(security_headers)
                // A compressing body is ~6 KB (every encoder's state inline):
                // boxed here, once, instead of moved through each layer above.
                .map_response(|response: http::Response<CompressionBody<Body>>| {
                    response.map(Body::new)
                })
                .layer(CompressionLayer::new())
                // Overload: refuse at once with 503 rather than queue
                // unboundedly; slow bodies and greedy clients hold no budget.
                .layer(middleware::from_fn_with_state(
                    admission::Admission::new(&limits),
                    admission::admit,
                ))
                .layer(middleware::from_fn_with_state(
                    limits.request_timeout,
                    admission::deadline,
                ))
                .layer(CsrfLayer::new()),
        )
}

/// A purchase route behind the per-address limit, when that is on: a layer
/// that lets everything through still costs every purchase its future.
fn limited_per_ip(route: MethodRouter<AppState>, state: &AppState) -> MethodRouter<AppState> {
    if state.purchase_limits.limits_per_ip() {
        route.route_layer(middleware::from_fn_with_state(
            state.clone(),
            purchase_limits::per_ip,
        ))
    } else {
        route
    }
}

/// The headers every response carries, set in one layer (five
/// `SetResponseHeaderLayer`s cost five nested futures per request; a plain
/// function, so no boxed future either).
fn security_headers<B>(mut response: http::Response<B>) -> http::Response<B> {
    let headers = response.headers_mut();
    headers
        .entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
        ));
    // Pages carry order codes, tokens and buyer emails: no shared or stored
    // copies. Static assets set their own long-lived policy.
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    response
}

/// How often the log-in limiters forget clients whose budget is full again.
pub const LIMITER_PRUNE_EVERY: Duration = Duration::from_secs(60);

/// A per-client limit on a router's routes: `login_burst` at once, then one
/// per `login_period`; refusals say how long to wait. Clients are keyed as
/// the other per-client caps are ([`per_client::ClientKey`]: an IPv4
/// address, an IPv6 /64), and a background task prunes the limiter's table
/// every [`LIMITER_PRUNE_EVERY`], so addresses seen once do not pile up.
fn rate_limited(router: Router<AppState>, limits: Limits) -> Router<AppState> {
    let config = tower_governor::governor::GovernorConfigBuilder::default()
        .key_extractor(per_client::ClientKeyExtractor)
        .period(limits.login_period)
        .burst_size(limits.login_burst)
        .finish();
    let Some(config) = config else {
        return router;
    };
    let limiter = std::sync::Arc::downgrade(config.limiter());
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(async move {
            let mut every = tokio::time::interval(LIMITER_PRUNE_EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            every.tick().await;
            loop {
                every.tick().await;
                // The app (and its limiter) is gone: so is this task.
                let Some(limiter) = limiter.upgrade() else {
                    break;
                };
                prune(&limiter);
            }
        });
    }
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

/// Readiness: the database answers (for a load balancer choosing where to
/// send buyers; liveness is `/healthz`).
async fn ready(State(db): State<sqlx::PgPool>) -> Result<&'static str, AppError> {
    crate::db::ping(&db).await?;
    Ok("ready")
}

type LoginLimiter = tower_governor::governor::SharedRateLimiter<
    per_client::ClientKey,
    governor::middleware::NoOpMiddleware<governor::clock::QuantaInstant>,
>;

/// Forget the clients whose budget is whole again (they would start afresh
/// anyway), and give the memory back.
fn prune(limiter: &LoginLimiter) {
    limiter.retain_recent();
    limiter.shrink_to_fit();
}

/// Liveness: the process serves. It touches neither the database pool nor
/// any budget, so it answers while a sale holds them all.
async fn health() -> &'static str {
    "ok"
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::net::{IpAddr, SocketAddr};

    use axum::{body::Body, extract::ConnectInfo, http::StatusCode};
    use tower::ServiceExt as _;

    use super::*;

    async fn post_from(app: &Router, ip: &str) -> StatusCode {
        let ip: IpAddr = ip.parse().unwrap();
        let mut request = Request::post("/login").body(Body::empty()).unwrap();
        request
            .extensions_mut()
            .insert(ConnectInfo(SocketAddr::new(ip, 40_000)));
        app.clone().oneshot(request).await.unwrap().status()
    }

    fn limited_app() -> Router {
        let limits = Limits {
            login_burst: 3,
            login_period: Duration::from_secs(3600),
            ..Limits::default()
        };
        let db = sqlx::PgPool::connect_lazy("postgres://127.0.0.1:1/unused").unwrap();
        rate_limited(
            Router::new().route("/login", post(|| async { "ok" })),
            limits,
        )
        .with_state(AppState::new(db))
    }

    #[tokio::test]
    async fn the_log_in_limiter_keys_ipv6_clients_by_their_64() {
        let app = limited_app();
        for ip in [
            "2001:db8:1:2::1",
            "2001:db8:1:2::2",
            "2001:db8:1:2:ffff:ffff:ffff:ffff",
        ] {
            assert_eq!(post_from(&app, ip).await, StatusCode::OK, "{ip}");
        }
        // A fourth address of the same /64 shares its budget...
        assert_eq!(
            post_from(&app, "2001:db8:1:2:abcd::9").await,
            StatusCode::TOO_MANY_REQUESTS
        );
        // ...the next /64 has its own, and IPv4 addresses are one each.
        assert_eq!(post_from(&app, "2001:db8:1:3::1").await, StatusCode::OK);
        for _ in 0..3 {
            assert_eq!(post_from(&app, "192.0.2.1").await, StatusCode::OK);
        }
        assert_eq!(
            post_from(&app, "192.0.2.1").await,
            StatusCode::TOO_MANY_REQUESTS
        );
        assert_eq!(post_from(&app, "192.0.2.2").await, StatusCode::OK);
        // An IPv4-mapped IPv6 address is the IPv4 client.
        assert_eq!(
            post_from(&app, "::ffff:192.0.2.1").await,
            StatusCode::TOO_MANY_REQUESTS
        );
    }

    fn limiter(period: Duration) -> LoginLimiter {
        tower_governor::governor::GovernorConfigBuilder::default()
            .key_extractor(per_client::ClientKeyExtractor)
            .period(period)
            .burst_size(1)
            .finish()
            .unwrap()
            .limiter()
            .clone()
    }

    #[test]
    fn pruning_forgets_clients_whose_budget_is_whole_again() {
        let key =
            |i: u16| per_client::ClientKey::of(IpAddr::from([0x2001, 0xdb8, i, 0, 0, 0, 0, 1]));
        // A period of a nanosecond: every budget is whole again at once.
        let quick = limiter(Duration::from_nanos(1));
        // An hour: none is.
        let slow = limiter(Duration::from_secs(3600));
        for i in 0..500 {
            assert!(quick.check_key(&key(i)).is_ok());
            assert!(slow.check_key(&key(i)).is_ok());
        }
        assert_eq!((quick.len(), slow.len()), (500, 500));
        std::thread::sleep(Duration::from_millis(1));
        prune(&quick);
        prune(&slow);
        assert_eq!(quick.len(), 0);
        assert_eq!(slow.len(), 500, "clients still limited are kept");
    }
}
