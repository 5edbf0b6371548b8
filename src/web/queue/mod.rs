//! The waiting room's buyer side: joining, the position page (HTML with a
//! meta refresh, or JSON), and the published pre-queue. Thin handlers
//! around `crate::waiting_room`.
//!
//! What a buyer holds travels in per-event HttpOnly cookies (`stampede_q_*`:
//! the signed entry, `stampede_pass_*`: the pass) and, for API clients, in
//! the `Stampede-Queue-Entry` header and the JSON answers.
//!
//! The cookies, the room lookup and the position are here; the pages in
//! page.rs, the JSON API in api.rs.

pub mod api;
mod page;

use std::net::SocketAddr;

use axum::{
    Extension,
    extract::ConnectInfo,
    http::{HeaderMap, HeaderValue, header},
};
use serde::Serialize;
use time::OffsetDateTime;

use super::AppState;
use crate::{
    domain::{EventId, QueueEntryId},
    error::AppError,
    waiting_room::{self, EntryToken, RULE, Ranked, Room, Standing},
};

pub use api::{api_challenge, api_join, api_position};
pub use page::{join, position_page, prequeue};

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

pub(super) fn set_cookie(
    state: &AppState,
    name: &str,
    value: &str,
    max_age_secs: i64,
) -> Option<HeaderValue> {
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

pub(super) async fn active_room(
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

pub(super) fn client(
    connect: Option<Extension<ConnectInfo<SocketAddr>>>,
) -> Option<std::net::IpAddr> {
    connect.map(|Extension(ConnectInfo(addr))| addr.ip())
}

/// Where the buyer stands, for the page and the JSON answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PositionBody {
    pub(super) entry_id: QueueEntryId,
    /// `waiting`, `admitted` or `done` (pass spent or expired).
    pub(super) state: &'static str,
    /// 1-based place among those still waiting (`null` once admitted).
    pub(super) place: Option<i64>,
    pub(super) ahead: Option<i64>,
    /// Seconds, from the admission rate (`null` when unknown).
    pub(super) estimated_wait_secs: Option<i64>,
    pub(super) in_prequeue: bool,
    /// The signed pass, while admitted: send it as `pass` with the order.
    pub(super) pass: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub(super) pass_expires_at: Option<OffsetDateTime>,
    pub(super) commitment_sha256: String,
    pub(super) seed: Option<String>,
    pub(super) rule: &'static str,
    /// A new entry token, once the entry has its rank: send it as
    /// `Stampede-Queue-Entry` from now on (the old one stays valid; this
    /// one carries the place, so the next polls are answered faster).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) entry_token: Option<String>,
}

/// How many ranks past the admitted mark read their entry: two ticks'
/// admissions at the room's rate (a hundred a tick without one), at least ten.
fn near_the_front(room: &Room) -> i64 {
    let per_tick = room
        .settings
        .admit_per_minute
        .map_or(100, |rate| (i64::from(rate) + 59) / 60);
    (2 * per_tick).max(10)
}

impl PositionBody {
    /// Waiting, with `ahead` entries still before this one.
    fn waiting_behind(&mut self, room: &Room, ahead: i64) {
        self.place = Some(ahead + 1);
        self.ahead = Some(ahead);
        self.estimated_wait_secs = room
            .settings
            .admit_per_minute
            .map(|rate| (ahead + 1) * 60 / i64::from(rate));
    }
}

impl PositionBody {
    /// Waiting, nothing more known yet.
    fn waiting(room: &Room, entry: QueueEntryId) -> Self {
        Self {
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
            entry_token: None,
        }
    }

    /// A new entry in the pre-queue before the opening: it waits for the
    /// shuffle like every other, so its answer needs no read.
    pub(super) fn new_in_prequeue(room: &Room, entry: QueueEntryId) -> Self {
        Self {
            in_prequeue: true,
            ..Self::waiting(room, entry)
        }
    }
}

pub(super) async fn position(
    state: &AppState,
    room: &Room,
    token: EntryToken,
    now: OffsetDateTime,
) -> Result<PositionBody, AppError> {
    let entry = token.entry;
    let mut body = PositionBody::waiting(room, entry);
    let rooms = state.sales.rooms();
    // A ranked token and the room's mark answer a buyer still waiting
    // without reading their entry: no Postgres per poll. Near the front
    // the entry is read: its admission should show at the next look, not
    // after the instance's next read of the mark.
    if let Some(place) = token.ranked
        && let Some(admitted_upto) = rooms.admitted_upto(&state.db, room.event_id).await?
        && place.rank > admitted_upto + near_the_front(room)
    {
        body.in_prequeue = place.prequeue;
        body.waiting_behind(room, place.rank - admitted_upto - 1);
        return Ok(body);
    }
    let standing = waiting_room::standing(&state.db, room.event_id, entry).await?;
    match standing {
        Standing::Waiting {
            ahead,
            prequeue,
            shuffled,
            rank,
        } => {
            body.in_prequeue = prequeue;
            if shuffled {
                body.waiting_behind(room, ahead);
            }
            if let (Some(rank), None) = (rank, token.ranked) {
                let place = Ranked { rank, prequeue };
                body.entry_token = Some(rooms.key().ranked_token(room.event_id, entry, place));
            }
        }
        Standing::Admitted { expires_at, spent } => {
            if spent || expires_at <= now {
                body.state = "done";
            } else {
                body.state = "admitted";
                body.pass = Some(
                    rooms
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
