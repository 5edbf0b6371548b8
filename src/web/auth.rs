//! One place that protects every organizer route: pages under /organizer
//! need a logged-in session, API routes under /api/v1/organizer a token.

use axum::{
    extract::{Request, State},
    http::header,
    middleware::Next,
    response::{IntoResponse, Redirect, Response},
};
use sqlx::PgPool;
use tower_sessions::Session;

use super::error::ApiError;
use crate::{
    auth::{CurrentOrganizer, SESSION_ORGANIZER, authenticate_token, find_organizer},
    domain::{ApiTokenId, OrganizerId},
    error::AppError,
};

/// Pages: the session's organizer, or a redirect to the log-in page that
/// comes back here afterwards.
pub async fn require_session(
    State(db): State<PgPool>,
    session: Session,
    mut request: Request,
    next: Next,
) -> Response {
    let organizer = match session.get::<OrganizerId>(SESSION_ORGANIZER).await {
        Ok(Some(id)) => find_organizer(&db, id).await,
        Ok(None) => Ok(None),
        Err(err) => Err(AppError::internal(err)),
    };
    match organizer {
        Ok(Some(organizer)) => {
            request.extensions_mut().insert(organizer);
            next.run(request).await
        }
        Ok(None) => {
            let next_path = request.uri().path();
            let target: String = form_urlencoded::Serializer::new(String::new())
                .append_pair("next", next_path)
                .finish();
            Redirect::to(&format!("/login?{target}")).into_response()
        }
        Err(err) => err.into_response(),
    }
}

/// API: `Authorization: Bearer <token>`, or 401.
pub async fn require_token(State(db): State<PgPool>, mut request: Request, next: Next) -> Response {
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned);
    let organizer: Result<Option<(CurrentOrganizer, ApiTokenId)>, AppError> = match token {
        Some(token) => authenticate_token(&db, &token).await,
        None => Ok(None),
    };
    match organizer {
        // The API's rate limit counts per account (`CurrentOrganizer`), not
        // per token: a second token buys no more requests.
        Ok(Some((organizer, _token_id))) => {
            request.extensions_mut().insert(organizer);
            next.run(request).await
        }
        Ok(None) => ApiError(AppError::Unauthorized).into_response(),
        Err(err) => ApiError(err).into_response(),
    }
}
