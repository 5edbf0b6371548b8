//! The waiting room's buyer side: joining, the position page (HTML with a
//! meta refresh, or JSON), and the published pre-queue. Thin handlers
//! around `crate::waiting_room`.
//!
//! What a buyer holds travels in per-event HttpOnly cookies (`stampede_q_*`:
//! the signed entry, `stampede_pass_*`: the pass) and, for API clients, in
//! the `Stampede-Queue-Entry` header and the JSON answers.

use std::net::SocketAddr;

use axum::{
    Extension, Json,
    body::Bytes,
    extract::{ConnectInfo, Path, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Redirect, Response},
};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::{
    AppState,
    error::ApiError,
    extract::{FormFields, PageContext, parse_id},
    views,
};
use crate::{
    domain::{EventId, QueueEntryId},
    error::AppError,
    waiting_room::{self, RULE, Room, Standing},
};

/// The API clients' header for their entry token.
pub const ENTRY_HEADER: &str = "stampede-queue-entry";

pub fn entry_cookie(event_id: EventId) -> String {
    format!("stampede_q_{}", event_id.get().simple())
}

pub fn pass_cookie(event_id: EventId) -> String {
    format!("stampede_pass_{}", event_id.get().simple())
}

/// A cookie's value from the request, if present.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, value)| value)
}

fn set_cookie(state: &AppState, name: &str, value: &str, max_age_secs: i64) -> Option<HeaderValue> {
    let secure = if state.secure_cookies { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{name}={value}; Path=/; Max-Age={max_age_secs}; HttpOnly; SameSite=Lax{secure}"
    ))
    .ok()
}

/// Whether the request carries a valid pass for the event (pages use it
/// to show the buy form; the sale checks again, and checks spending).
pub fn holds_pass(
    state: &AppState,
    headers: &HeaderMap,
    event_id: EventId,
    now: OffsetDateTime,
) -> bool {
    let pass = cookie(headers, &pass_cookie(event_id));
    state
        .sales
        .rooms()
        .key()
        .check_pass(event_id, pass, now)
        .is_ok()
}

async fn active_room(
    state: &AppState,
    event_id: EventId,
) -> Result<std::sync::Arc<Room>, AppError> {
    state
        .sales
        .rooms()
        .active(&state.db, event_id, state.clock.now())
        .await?
        .ok_or(AppError::NotFound)
}

fn client(connect: Option<Extension<ConnectInfo<SocketAddr>>>) -> Option<std::net::IpAddr> {
    connect.map(|Extension(ConnectInfo(addr))| addr.ip())
}

/// `POST /events/{id}/queue` (a form; CSRF-checked by the layer): join, or
/// keep the entry this browser holds; 303 to the position page. A new
/// entry needs the `proof` field, which static/app.js fills from the Web
/// Worker's solution.
pub async fn join(
    State(state): State<AppState>,
    Path(id): Path<String>,
    connect: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    fields: FormFields,
) -> Result<Response, AppError> {
    let event_id: EventId = parse_id(&id)?;
    let now = state.clock.now();
    let existing = cookie(&headers, &entry_cookie(event_id));
    let joined = waiting_room::join(
        &state.db,
        state.sales.rooms(),
        event_id,
        existing,
        Some(fields.get("proof")),
        client(connect),
        now,
    )
    .await?;
    let mut response = Redirect::to(&format!("/events/{event_id}/queue")).into_response();
    // A day: longer than any queue; the entry is worthless after the sale.
    if let Some(cookie) = set_cookie(&state, &entry_cookie(event_id), &joined.token, 86_400) {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    Ok(response)
}

/// Where the buyer stands, for the page and the JSON answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PositionBody {
    entry_id: QueueEntryId,
    /// `waiting`, `admitted` or `done` (pass spent or expired).
    state: &'static str,
    /// 1-based place among those still waiting (`null` once admitted).
    place: Option<i64>,
    ahead: Option<i64>,
    /// Seconds, from the admission rate (`null` when unknown).
    estimated_wait_secs: Option<i64>,
    in_prequeue: bool,
    /// The signed pass, while admitted: send it as `pass` with the order.
    pass: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pass_expires_at: Option<OffsetDateTime>,
    commitment_sha256: String,
    seed: Option<String>,
    rule: &'static str,
}

async fn position(
    state: &AppState,
    room: &Room,
    entry: QueueEntryId,
    now: OffsetDateTime,
) -> Result<PositionBody, AppError> {
    let standing = waiting_room::standing(&state.db, room.event_id, entry).await?;
    let mut body = PositionBody {
        entry_id: entry,
        state: "waiting",
        place: None,
        ahead: None,
        estimated_wait_secs: None,
        in_prequeue: false,
        pass: None,
        pass_expires_at: None,
        commitment_sha256: room.commitment_hex(),
        seed: room.revealed_seed_hex(),
        rule: RULE,
    };
    match standing {
        Standing::Waiting {
            ahead,
            prequeue,
            shuffled,
        } => {
            body.in_prequeue = prequeue;
            if shuffled {
                body.place = Some(ahead + 1);
                body.ahead = Some(ahead);
                body.estimated_wait_secs = room
                    .settings
                    .admit_per_minute
                    .map(|rate| (ahead + 1) * 60 / i64::from(rate));
            }
        }
        Standing::Admitted { expires_at, spent } => {
            if spent || expires_at <= now {
                body.state = "done";
            } else {
                body.state = "admitted";
                body.pass = Some(
                    state
                        .sales
                        .rooms()
                        .key()
                        .pass(room.event_id, entry, expires_at)
                        .to_string(),
                );
                body.pass_expires_at = Some(expires_at);
            }
        }
    }
    Ok(body)
}

/// `GET /events/{id}/queue`: the position page. It refreshes itself (a
/// meta refresh, with jitter so that refreshes do not come in waves); once
/// admitted it sets the pass cookie and sends the buyer to the event page.
pub async fn position_page(
    State(state): State<AppState>,
    ctx: PageContext,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    let event_id: EventId = parse_id(&id)?;
    let room = active_room(&state, event_id).await?;
    let now = state.clock.now();
    let entry = cookie(&headers, &entry_cookie(event_id)).and_then(|token| {
        state
            .sales
            .rooms()
            .key()
            .verify_entry_token(event_id, token)
    });
    let Some(entry) = entry else {
        // No place yet: the event page has the join button.
        return Ok(Redirect::to(&format!("/events/{event_id}")).into_response());
    };
    let body = position(&state, &room, entry, now).await?;
    let refresh = {
        use rand::Rng as _;
        rand::rng().random_range(5..=9_u32)
    };
    let mut response =
        views::queue::position(&ctx, event_id, &body_view(&body), refresh).into_response();
    if let (Some(pass), Some(expires)) = (&body.pass, body.pass_expires_at) {
        let max_age = (expires - now).whole_seconds().max(1);
        if let Some(cookie) = set_cookie(&state, &pass_cookie(event_id), pass, max_age) {
            response.headers_mut().append(header::SET_COOKIE, cookie);
        }
    }
    Ok(response)
}

fn body_view(body: &PositionBody) -> views::queue::Position<'_> {
    views::queue::Position {
        state: body.state,
        place: body.place,
        ahead: body.ahead,
        estimated_wait_secs: body.estimated_wait_secs,
        in_prequeue: body.in_prequeue,
        commitment: &body.commitment_sha256,
        seed: body.seed.as_deref(),
        rule: body.rule,
    }
}

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
    let position = position(&state, &room, joined.entry, now).await?;
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
        .and_then(|token| {
            state
                .sales
                .rooms()
                .key()
                .verify_entry_token(event_id, token)
        })
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

/// The published pre-queue: everything needed to recompute the order.
#[derive(Debug, Serialize)]
pub struct PrequeueBody {
    event_id: EventId,
    seed: String,
    commitment_sha256: String,
    rule: &'static str,
    /// Sorted by id (which says nothing of the order).
    entries: Vec<uuid::Uuid>,
}

/// `GET /events/{id}/queue/prequeue.json`: 404 before the opening.
pub async fn prequeue(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<PrequeueBody>, ApiError> {
    let event_id: EventId = parse_id(&id)?;
    let (room, entries) = waiting_room::published_prequeue(&state.db, event_id)
        .await?
        .ok_or(AppError::NotFound)?;
    Ok(Json(PrequeueBody {
        event_id,
        seed: room.revealed_seed_hex().unwrap_or_default(),
        commitment_sha256: room.commitment_hex(),
        rule: RULE,
        entries,
    }))
}
