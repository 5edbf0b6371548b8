//! The router's own layers: the per-route limits (purchases per client
//! address, log-ins per client, organizer API requests per account) and the
//! security headers every response carries.

use std::{net::SocketAddr, time::Duration};

use axum::{
    Router,
    extract::{ConnectInfo, Request, State},
    http::{self, HeaderValue, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::MethodRouter,
};

use super::{
    AppState, Limits, error,
    per_client::{self, ClientKey},
};
use crate::{auth::CurrentOrganizer, error::AppError};

/// A purchase route behind the per-address limit, when that is on: a layer
/// that lets everything through still costs every purchase its future.
pub(super) fn limited_per_ip(
    route: MethodRouter<AppState>,
    state: &AppState,
) -> MethodRouter<AppState> {
    if state.purchase_limits.limits_per_ip() {
        route.route_layer(middleware::from_fn_with_state(state.clone(), per_ip))
    } else {
        route
    }
}

/// The per-address limit, on the purchase routes.
pub async fn per_ip(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| ClientKey::of(addr.ip()));
    if let Some(peer) = peer
        && let Err(err) = state.purchase_limits.check_client(&peer)
    {
        return error::refuse(request.uri(), &err);
    }
    next.run(request).await
}

/// On the organizer API's routes, inside the token check.
pub async fn per_account(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if let Some(organizer) = request.extensions().get::<CurrentOrganizer>()
        && let Err(err) = state.api_rate.check(organizer.id)
    {
        return error::refuse(request.uri(), &err);
    }
    next.run(request).await
}

/// The headers every response carries, set in one layer (five
/// `SetResponseHeaderLayer`s cost five nested futures per request; a plain
/// function, so no boxed future either).
pub(super) fn security_headers<B>(mut response: http::Response<B>) -> http::Response<B> {
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
pub(super) fn rate_limited(router: Router<AppState>, limits: Limits) -> Router<AppState> {
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

type LoginLimiter = tower_governor::governor::SharedRateLimiter<
    ClientKey,
    governor::middleware::NoOpMiddleware<governor::clock::QuantaInstant>,
>;

/// Forget the clients whose budget is whole again (they would start afresh
/// anyway), and give the memory back.
fn prune(limiter: &LoginLimiter) {
    limiter.retain_recent();
    limiter.shrink_to_fit();
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::net::{IpAddr, SocketAddr};

    use axum::{body::Body, extract::ConnectInfo, http::StatusCode, routing::post};
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
        let key = |i: u16| ClientKey::of(IpAddr::from([0x2001, 0xdb8, i, 0, 0, 0, 0, 1]));
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
