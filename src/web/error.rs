//! How an [`AppError`] reaches the client: pages get an HTML error page,
//! the JSON API `{"error": {"code", "message", "field"}}`. Internal causes
//! are logged here, never shown.

use axum::{
    Json,
    http::{HeaderValue, Uri, header},
    response::{IntoResponse, Response},
};
use serde::Serialize;
use utoipa::ToSchema;

use super::views;
use crate::error::AppError;

fn log(err: &AppError) {
    match err {
        AppError::Internal(cause) => tracing::error!(error = ?cause, "internal error"),
        AppError::Overloaded => {
            tracing::warn!("shedding load: the database is busy or out of reach")
        }
        _ => {}
    }
}

pub(super) fn add_headers(err: &AppError, response: &mut Response) {
    let headers = response.headers_mut();
    match err {
        AppError::Overloaded => {
            headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        AppError::PaymentUnavailable => {
            headers.insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        AppError::TooManyRequests { retry_after_secs } => {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(*retry_after_secs));
        }
        AppError::Unauthorized => {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        _ => {}
    }
}

/// Every JSON API error: `{"error": {"code", "message", "field"}}`. The
/// OpenAPI document's error schema is derived from these two structs.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody<'a> {
    error: ErrorDetail<'a>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail<'a> {
    /// Stable and machine-readable: `invalid`, `not_found`, `unauthorized`,
    /// `forbidden`, `rate_limited`, `sold_out`, `not_enough_left`,
    /// `limit_exceeded`, `sale_not_open`, `sale_closed`,
    /// `idempotency_conflict`, `nonce_conflict`, `already_cancelled`,
    /// `event_started`, `ticket_type_sold`, `last_ticket_type`,
    /// `event_cancelled`, `method_not_allowed`, `payload_too_large`,
    /// `request_timeout`, `overloaded`, `payment_unavailable`,
    /// `bad_signature`, `internal`.
    #[schema(example = "not_found")]
    code: &'static str,
    /// For people; it may change.
    message: String,
    /// The input field (body field or query parameter) the error is about.
    #[schema(value_type = Option<String>)]
    field: Option<&'a str>,
}

/// The JSON body and headers, without logging.
fn json_response(err: &AppError) -> Response {
    let body = ErrorBody {
        error: ErrorDetail {
            code: err.code(),
            message: err.to_string(),
            field: err.field(),
        },
    };
    let mut response = (err.status(), Json(body)).into_response();
    add_headers(err, &mut response);
    response
}

/// The HTML error page and headers, without logging.
fn page_response(err: &AppError) -> Response {
    let status = err.status();
    let mut response = (status, views::error_page(status, &err.to_string())).into_response();
    add_headers(err, &mut response);
    response
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        log(&self);
        page_response(&self)
    }
}

/// The JSON form of [`AppError`], for handlers under `/api/`.
#[derive(Debug)]
pub struct ApiError(pub AppError);

impl<E: Into<AppError>> From<E> for ApiError {
    fn from(err: E) -> Self {
        Self(err.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        log(&self.0);
        json_response(&self.0)
    }
}

fn is_api(uri: &Uri) -> bool {
    uri.path().starts_with("/api/")
}

/// API paths answer in JSON, pages in HTML.
pub fn respond(uri: &Uri, err: AppError) -> Response {
    if is_api(uri) {
        ApiError(err).into_response()
    } else {
        err.into_response()
    }
}

pub async fn not_found(uri: Uri) -> Response {
    respond(&uri, AppError::NotFound)
}

pub async fn method_not_allowed(uri: Uri) -> Response {
    respond(&uri, AppError::MethodNotAllowed)
}

/// A refusal at admission (load shed, a client over its share, a body too
/// slow): answered as [`respond`] does, but without a log line per request,
/// which under overload would be a flood of its own.
pub fn refuse(uri: &Uri, err: &AppError) -> Response {
    if is_api(uri) {
        json_response(err)
    } else {
        page_response(err)
    }
}
