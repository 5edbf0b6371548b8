//! The JSON API's side: join, the challenge to solve first, the position.

use std::net::SocketAddr;

use axum::{
    Extension, Json,
    body::Bytes,
    extract::{ConnectInfo, Path, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::{ENTRY_HEADER, PositionBody, active_room, client, position};
use crate::web::{AppState, error::ApiError, extract::parse_id};
use crate::{
    domain::EventId,
    error::AppError,
    waiting_room::{self, EntryToken},
};

/// `{"entry_id", "token", ...position}`: the answer to an API join.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct JoinedBody {
    token: String,
    #[serde(flatten)]
    position: PositionBody,
}

/// The body of an API join: the solved challenge (not needed to keep an
/// entry already held).
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JoinRequest {
    /// `{challenge}.{nonce}`: a challenge from `GET .../queue/challenge`
    /// and a decimal nonce such that SHA-256 of this text starts with the
    /// challenge's `difficulty_bits` zero bits.
    #[serde(default)]
    proof: Option<String>,
}

/// An API join's body: empty, or a JSON object (`{"proof": "..."}`).
fn join_request(headers: &HeaderMap, body: &Bytes) -> Result<JoinRequest, AppError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(JoinRequest::default());
    }
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !is_json || body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(AppError::BadRequest(
            "Send a JSON object with Content-Type: application/json: {\"proof\": \"...\"}.".into(),
        ));
    }
    serde_json::from_slice(body).map_err(|err| {
        AppError::BadRequest(format!(
            "Send {{\"proof\": \"<challenge>.<nonce>\"}} as the body: {err}"
        ))
    })
}

/// `POST /api/v1/events/{id}/queue` → 201 with the entry token (also in the
/// `Stampede-Queue-Entry` header), or 200 with the entry already held (the
/// token sent in that header).
#[utoipa::path(
    post,
    path = "/api/v1/events/{id}/queue",
    tag = "public",
    summary = "Join an event's waiting room",
    description = "201 with a new entry, which needs `proof`: a solved challenge from `GET /api/v1/events/{id}/queue/challenge` (see its description for the rule). 200 with the entry already held when its token is sent in `Stampede-Queue-Entry` (no proof needed). The token is in the body and in that header.",
    params(
        ("id" = uuid::Uuid, Path, description = "The event's id"),
        ("Stampede-Queue-Entry" = Option<String>, Header, description = "The token of an entry already held"),
    ),
    request_body(content = Option<JoinRequest>, description = "The solved challenge; may be empty when keeping an entry already held", content_type = "application/json"),
    responses(
        (status = 201, description = "Joined", body = JoinedBody, headers(("Stampede-Queue-Entry" = String, description = "The entry token"))),
        (status = 200, description = "The entry already held", body = JoinedBody, headers(("Stampede-Queue-Entry" = String, description = "The entry token"))),
        (status = 400, description = "The body is not a JSON object with `proof`", body = crate::web::error::ErrorBody),
        (status = 403, description = "The queue does not take entries now, or the proof is missing (`proof_required`), expired (`proof_expired`) or wrong (`proof_invalid`)", body = crate::web::error::ErrorBody),
        (status = 404, description = "No published event with an open waiting room has this id", body = crate::web::error::ErrorBody),
        (status = 409, description = "This solved challenge already made an entry (`proof_reused`)", body = crate::web::error::ErrorBody),
        (status = 429, description = "This address holds too many entries (`queue_entries_limit`)", body = crate::web::error::ErrorBody),
    ),
)]
pub async fn api_join(
    State(state): State<AppState>,
    Path(id): Path<String>,
    connect: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let event_id: EventId = parse_id(&id)?;
    let request = join_request(&headers, &body)?;
    let room = active_room(&state, event_id).await?;
    let now = state.clock.now();
    let existing = headers.get(ENTRY_HEADER).and_then(|v| v.to_str().ok());
    let joined = waiting_room::join(
        &state.db,
        state.sales.rooms(),
        event_id,
        existing,
        request.proof.as_deref(),
        client(connect),
        now,
    )
    .await?;
    let room = if joined.new {
        room
    } else {
        active_room(&state, event_id).await?
    };
    let entry = EntryToken {
        entry: joined.entry,
        ranked: None,
    };
    let position = if joined.new && joined.unshuffled {
        PositionBody::new_in_prequeue(&room, joined.entry)
    } else {
        position(&state, &room, entry, now).await?
    };
    let status = if joined.new {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let mut response = (
        status,
        Json(JoinedBody {
            token: joined.token.clone(),
            position,
        }),
    )
        .into_response();
    if let Ok(value) = HeaderValue::from_str(&joined.token) {
        response.headers_mut().insert(ENTRY_HEADER, value);
    }
    Ok(response)
}

/// A challenge to solve before joining.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ChallengeBody {
    /// Find a decimal nonce such that SHA-256 of the ASCII text
    /// `{challenge}.{nonce}` starts with `difficulty_bits` zero bits; send
    /// that text as `proof`.
    challenge: String,
    difficulty_bits: u32,
    /// Hashes a solver needs on average: 2^difficulty_bits.
    expected_hashes: u64,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    expires_at: OffsetDateTime,
    rule: &'static str,
}

/// The rule of the proof of work, in words (docs/organizer-api.md says the same).
pub const PROOF_RULE: &str = "Find a nonce of 1 to 20 decimal digits such that the SHA-256 of the \
ASCII text `{challenge}.{nonce}` starts with at least `difficulty_bits` zero bits, and send that \
text as `proof` when joining, before `expires_at`. Each solved challenge joins once.";

/// `GET /api/v1/events/{id}/queue/challenge`: a fresh challenge (no I/O
/// beyond the cached room; the page's script asks for one when the buyer
/// presses "Join the queue").
#[utoipa::path(
    get,
    path = "/api/v1/events/{id}/queue/challenge",
    tag = "public",
    summary = "A proof-of-work challenge to solve before joining an event's waiting room",
    description = "Find a decimal nonce (1 to 20 digits) such that SHA-256 of the ASCII text `{challenge}.{nonce}` starts with `difficulty_bits` zero bits, then send `{\"proof\": \"{challenge}.{nonce}\"}` to `POST /api/v1/events/{id}/queue` before `expires_at`. Each solution joins once.",
    params(("id" = uuid::Uuid, Path, description = "The event's id")),
    responses(
        (status = 200, description = "A fresh challenge", body = ChallengeBody),
        (status = 404, description = "No published event with an open waiting room has this id", body = crate::web::error::ErrorBody),
    ),
)]
pub async fn api_challenge(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<ChallengeBody>, ApiError> {
    let event_id: EventId = parse_id(&id)?;
    let room = active_room(&state, event_id).await?;
    let challenge = state
        .sales
        .rooms()
        .challenge(room.event_id, state.clock.now());
    Ok(Json(ChallengeBody {
        expected_hashes: challenge.expected_hashes(),
        challenge: challenge.token,
        difficulty_bits: challenge.bits,
        expires_at: challenge.expires_at,
        rule: PROOF_RULE,
    }))
}

/// `GET /api/v1/events/{id}/queue` with the `Stampede-Queue-Entry` header:
/// the position, and the pass once admitted.
#[utoipa::path(
    get,
    path = "/api/v1/events/{id}/queue",
    tag = "public",
    summary = "Your place in an event's waiting room, and your pass once admitted",
    params(
        ("id" = uuid::Uuid, Path, description = "The event's id"),
        ("Stampede-Queue-Entry" = String, Header, description = "The entry token from the join"),
    ),
    responses(
        (status = 200, description = "Where the entry stands", body = PositionBody),
        (status = 404, description = "No published event with an open waiting room has this id", body = crate::web::error::ErrorBody),
        (status = 422, description = "No valid entry token (`field`: `Stampede-Queue-Entry`)", body = crate::web::error::ErrorBody),
    ),
)]
pub async fn api_position(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<PositionBody>, ApiError> {
    let event_id: EventId = parse_id(&id)?;
    let room = active_room(&state, event_id).await?;
    let entry = headers
        .get(ENTRY_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|token| state.sales.rooms().key().verify_token(event_id, token))
        .ok_or_else(|| {
            AppError::Invalid(crate::domain::InvalidField::new(
                ENTRY_HEADER,
                "Send the entry token from your join as the Stampede-Queue-Entry header.",
            ))
        })?;
    Ok(Json(
        position(&state, &room, entry, state.clock.now()).await?,
    ))
}
