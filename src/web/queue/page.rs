//! The pages' side: the join form, the position page, and the published
//! pre-queue.

use std::net::SocketAddr;

use axum::{
    Extension, Json,
    extract::{ConnectInfo, Path, State},
    http::{HeaderMap, header},
    response::{IntoResponse, Redirect, Response},
};
use serde::Serialize;

use super::{
    PositionBody, active_room, client, cookie, entry_cookie, pass_cookie, position, set_cookie,
};
use crate::web::{
    AppState,
    error::ApiError,
    extract::{FormFields, PageContext, parse_id},
    views,
};
use crate::{
    domain::EventId,
    error::AppError,
    waiting_room::{self, RULE},
};

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
    if let Some(cookie) = set_cookie(
        &state,
        &entry_cookie(event_id),
        &joined.token,
        ENTRY_COOKIE_SECS,
    ) {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    Ok(response)
}

/// The entry cookie's life, a day: longer than any queue; the entry is
/// worthless after the sale.
const ENTRY_COOKIE_SECS: i64 = 86_400;

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
    let entry = cookie(&headers, &entry_cookie(event_id))
        .and_then(|token| state.sales.rooms().key().verify_token(event_id, token));
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
    if let Some(token) = &body.entry_token
        && let Some(cookie) = set_cookie(&state, &entry_cookie(event_id), token, ENTRY_COOKIE_SECS)
    {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
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
