//! CSRF protection for every state-changing form, in one layer.
//!
//! Two defences: tower-http's `CsrfLayer` refuses cross-origin requests by
//! their `Sec-Fetch-Site`/`Origin` headers, and this module adds a token
//! (a double-submit cookie: no server state, so a page view during the rush
//! writes nothing): a random value in an HttpOnly cookie that every form
//! repeats in a hidden `csrf_token` field. A POST to a page route whose field
//! does not match the cookie is refused with 403 before any handler runs.
//! The JSON API is exempt: it authenticates with bearer tokens, not cookies.

use super::{AppState, MAX_BODY_BYTES};
use crate::{auth::random_token, error::AppError};
use axum::{
    body::{Body, to_bytes},
    extract::{FromRequestParts, Request, State},
    http::{HeaderValue, Method, header, request::Parts},
    middleware::Next,
    response::{IntoResponse, Response},
};

pub const COOKIE: &str = "stampede_csrf";
pub const FIELD: &str = "csrf_token";

/// The token to embed in this response's forms.
#[derive(Debug, Clone, Default)]
pub struct CsrfToken(pub String);

impl<S: Send + Sync> FromRequestParts<S> for CsrfToken {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(parts
            .extensions
            .get::<CsrfToken>()
            .cloned()
            .unwrap_or_default())
    }
}

fn cookie_token(parts: &Parts) -> Option<String> {
    parts
        .headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned())
        .filter(|value| {
            value.len() == 43
                && value
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// Comparison whose time does not depend on where the strings differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0_u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

pub async fn protect(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    let path = parts.uri.path();
    let is_page = !(path.starts_with("/api/")
        || path.starts_with("/static/")
        || path == "/healthz"
        || path == "/payments/stripe/webhook");
    let existing = cookie_token(&parts);
    let unsafe_method = !matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS);

    let body = if is_page && unsafe_method {
        let bytes = match to_bytes(body, MAX_BODY_BYTES).await {
            Ok(bytes) => bytes,
            Err(_) => return AppError::PayloadTooLarge.into_response(),
        };
        let submitted = form_urlencoded::parse(&bytes)
            .find(|(name, _)| name == FIELD)
            .map(|(_, value)| value.into_owned());
        let valid =
            matches!((&existing, &submitted), (Some(cookie), Some(field)) if same(cookie, field));
        if !valid {
            tracing::warn!(path = %parts.uri.path(), "refused a form post without a valid CSRF token");
            return AppError::Forbidden(
                "This form has expired or did not come from Stampede. Go back, reload the page and try again.",
            )
            .into_response();
        }
        Body::from(bytes)
    } else {
        body
    };

    let (token, fresh) = match existing {
        Some(token) => (token, false),
        None => (random_token(), true),
    };
    parts.extensions.insert(CsrfToken(token.clone()));
    let mut response = next.run(Request::from_parts(parts, body)).await;
    if fresh && is_page {
        let secure = if state.secure_cookies { "; Secure" } else { "" };
        let cookie = format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Lax{secure}");
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    response
}
