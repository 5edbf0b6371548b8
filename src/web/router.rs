//! The route table: every page, form and API route with its handler, and
//! the layers around them.

use std::time::Duration;

use axum::{
    Router,
    body::Body,
    extract::{DefaultBodyLimit, State},
    http::{self, HeaderName, Request},
    middleware,
    routing::{get, post},
};
use tower::ServiceBuilder;
use tower_http::{
    classify::ServerErrorsFailureClass,
    compression::{CompressionBody, CompressionLayer},
    csrf::CsrfLayer,
    request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer},
    trace::TraceLayer,
};
use tower_sessions::{Expiry, SessionManagerLayer, cookie::SameSite};

use super::{
    AppState, MAX_BODY_BYTES, account, admission, api, assets, auth, csrf, dashboard, door, error,
    layers::{self, limited_per_ip, rate_limited, security_headers},
    organizer, pages, pay, presale, queue, session_store, telemetry, tickets, waitlist, webhooks,
};
use crate::error::AppError;

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
        .route("/orders/{id}/tickets.pdf", get(tickets::pdf))
        .route("/orders/{id}/event.ics", get(tickets::calendar))
        .route("/tickets", get(tickets::find_form))
        .route("/orders/{id}/pay", get(pay::pay_page))
        .route("/orders/{id}/paid", get(pay::paid_return))
        // Stripe's signed events (no CSRF token: the signature is the proof).
        .route("/payments/stripe/webhook", post(pay::stripe_webhook))
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
        .route(
            "/account/confirm-email/{id}",
            get(account::confirm_email_page).post(account::confirm_email),
        )
        // Door staff, through a staff link (no account).
        .route("/door", get(door::scanner).post(door::scan));

    // Log-in and sign-up attempts (each runs the deliberately slow password
    // hash) are limited per client address (the peer, or the client a
    // trusted balancer names: see src/server/proxy.rs). Each route gets its own budget.
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
        ))
        // "Find my tickets" mails an address: limited per client address
        // like a log-in (and per mailbox in `mail::ask_lookup`).
        .merge(limited(
            Router::new().route("/tickets", post(tickets::find)),
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
        .route(
            "/organizer/events/{id}/orders/{order}/resend",
            post(tickets::resend_from_dashboard),
        )
        .route("/organizer/events/{id}/door-links", post(door::create_link))
        .route(
            "/organizer/events/{id}/door-links/{link}/revoke",
            post(door::revoke_link),
        )
        .route("/organizer/settings", get(account::settings))
        .route(
            "/organizer/settings/confirmation-mail",
            post(account::resend_confirmation),
        )
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
            layers::per_account,
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
                }).on_failure(log_failure))
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

/// A 5xx as the trace layer reports it. A 503 is a refusal by design
/// (overload, a draining instance's `/readyz`, a database out of reach,
/// which warns where it is decided): at debug level, or an overload would
/// write an ERROR line per refused request. Any other 5xx is an ERROR.
fn log_failure(class: ServerErrorsFailureClass, latency: Duration, _span: &tracing::Span) {
    match class {
        ServerErrorsFailureClass::StatusCode(http::StatusCode::SERVICE_UNAVAILABLE) => {
            tracing::debug!(?latency, "refused with 503");
        }
        class => tracing::error!(%class, ?latency, "response failed"),
    }
}

/// Readiness: the database answers and the instance is not draining (for
/// a load balancer choosing where to send buyers; liveness is `/healthz`).
async fn ready(
    State(state): State<AppState>,
) -> Result<(http::StatusCode, &'static str), AppError> {
    if state.draining.load(std::sync::atomic::Ordering::Relaxed) {
        return Ok((http::StatusCode::SERVICE_UNAVAILABLE, "draining"));
    }
    crate::db::ping(&state.db).await?;
    Ok((http::StatusCode::OK, "ready"))
}

/// Liveness: the process serves. It touches neither the database pool nor
/// any budget, so it answers while a sale holds them all.
async fn health() -> &'static str {
    "ok"
}
