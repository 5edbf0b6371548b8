//! Admission: what a request must get past before it takes a share of the
//! server. In order:
//! 1. `/healthz` skips everything here: liveness never queues behind the sale.
//! 2. A per-client-address cap on requests in flight (429 beyond it).
//! 3. The body is read whole (it is small: [`MAX_BODY_BYTES`]) within the
//!    body-read timeout, or the answer is 408; a slow body holds only its
//!    own client's share, never a slot of the budgets below. The bytes read
//!    are also kept as [`ReadBody`], so that `ApiJson` takes them without
//!    reading the body a second time.
//! 4. Two budgets of requests in flight, one for buying (the purchase
//!    routes) and one for everything else, so that neither can starve the
//!    other; over budget, 503 with `Retry-After` at once.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use axum::{
    body::{Body, Bytes},
    extract::{ConnectInfo, Request, State},
    http::Method,
    middleware::Next,
    response::Response,
};
use http_body::Body as _;
use http_body_util::{BodyExt as _, LengthLimitError, Limited};
use tokio::sync::Semaphore;

use super::{Limits, MAX_BODY_BYTES, error::refuse, per_client::PerClient};
use crate::error::AppError;

/// The request's body as admission read it: the same bytes as the body
/// handed on (nothing between admission and the handlers changes a body).
/// A clone of [`Bytes`] shares them, no copy.
#[derive(Debug, Clone)]
pub struct ReadBody(pub Bytes);

#[derive(Debug)]
pub struct Admission {
    per_client: PerClient,
    body_read_timeout: Duration,
    purchases: Semaphore,
    others: Semaphore,
}

impl Admission {
    pub fn new(limits: &Limits) -> Arc<Self> {
        Arc::new(Self {
            per_client: PerClient::new(limits.max_in_flight_per_ip),
            body_read_timeout: limits.body_read_timeout,
            purchases: Semaphore::new(limits.max_purchases_in_flight),
            others: Semaphore::new(limits.max_in_flight),
        })
    }
}

/// `POST /api/v1/orders` and `POST /events/{id}/orders`: the routes that buy.
pub fn is_purchase(method: &Method, path: &str) -> bool {
    *method == Method::POST
        && (path == "/api/v1/orders"
            || path
                .strip_prefix("/events/")
                .and_then(|rest| rest.strip_suffix("/orders"))
                .is_some_and(|id| !id.is_empty() && !id.contains('/')))
}

pub async fn admit(
    State(admission): State<Arc<Admission>>,
    request: Request,
    next: Next,
) -> Response {
    let uri = request.uri().clone();
    if uri.path() == "/healthz" {
        return next.run(request).await;
    }
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip());
    let _client_slot = match peer.map(|ip| admission.per_client.try_acquire(ip)) {
        Some(None) => {
            tracing::debug!(
                ?peer,
                "refused: too many requests in flight from this address"
            );
            let too_many = AppError::TooManyRequests {
                retry_after_secs: 1,
            };
            return refuse(&uri, &too_many);
        }
        Some(Some(slot)) => Some(slot),
        None => None,
    };
    let request = match read_body(request, admission.body_read_timeout).await {
        Ok(request) => request,
        Err(err) => return refuse(&uri, &err),
    };
    let budget = if is_purchase(request.method(), uri.path()) {
        &admission.purchases
    } else {
        &admission.others
    };
    let Ok(_permit) = budget.try_acquire() else {
        tracing::debug!(path = %uri.path(), "shed: no budget left");
        return refuse(&uri, &AppError::Overloaded);
    };
    next.run(request).await
}

/// The request timeout: past it the request is dropped (a purchase's
/// transaction rolls back with its connection) and the answer is the 503 of
/// overload, with `Retry-After` (the JSON `overloaded` error under `/api/`).
pub async fn deadline(State(timeout): State<Duration>, request: Request, next: Next) -> Response {
    let uri = request.uri().clone();
    match tokio::time::timeout(timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!(path = %uri.path(), "refused: the request timed out");
            refuse(&uri, &AppError::Overloaded)
        }
    }
}

/// The request with its body read into memory, within `timeout`.
async fn read_body(request: Request, timeout: Duration) -> Result<Request, AppError> {
    if request.body().is_end_stream() {
        return Ok(request);
    }
    let (parts, body) = request.into_parts();
    let collected = tokio::time::timeout(timeout, Limited::new(body, MAX_BODY_BYTES).collect())
        .await
        .map_err(|_| AppError::RequestTimeout)?;
    let bytes = match collected {
        Ok(collected) => collected.to_bytes(),
        Err(err) if err.is::<LengthLimitError>() => return Err(AppError::PayloadTooLarge),
        Err(_) => {
            return Err(AppError::BadRequest(
                "The request body could not be read.".into(),
            ));
        }
    };
    let mut request = Request::from_parts(parts, Body::from(bytes.clone()));
    request.extensions_mut().insert(ReadBody(bytes));
    Ok(request)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_two_buying_routes_count_as_purchases() {
        let post = Method::POST;
        assert!(is_purchase(&post, "/api/v1/orders"));
        assert!(is_purchase(
            &post,
            "/events/6f1c2a8e-0000-4000-8000-000000000000/orders"
        ));
        assert!(!is_purchase(&Method::GET, "/api/v1/orders"));
        assert!(!is_purchase(&post, "/api/v1/orders/x/cancel"));
        assert!(!is_purchase(&post, "/events//orders"));
        assert!(!is_purchase(&post, "/events/a/b/orders"));
        assert!(!is_purchase(&post, "/orders/x/cancel"));
        assert!(!is_purchase(&post, "/organizer/events"));
    }
}
