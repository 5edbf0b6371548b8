//! Check-in for organizer tokens, under
//! `/api/v1/organizer/events/{id}/...`: redeem a code, search tickets,
//! list the check-ins since a cursor. Another organizer's event is 404.

use axum::{
    Extension, Json,
    extract::{Path, RawQuery, State},
};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;

use super::ApiResult;
use crate::{
    auth::CurrentOrganizer,
    checkin::{
        self, Answer, Scan,
        lists::{self, CheckInPage, TicketPage, TicketQuery},
    },
    domain::{
        CheckInCursor, DoorName, Email, EventId, ForField, InvalidField, OrderId, OrderStatus,
        ScanNonce, TicketCode, page_limit,
    },
    error::AppError,
    web::{
        AppState,
        error::ErrorBody,
        extract::{ApiJson, parse_id},
    },
};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RedeemRequest {
    #[schema(min_length = 1, max_length = 64, example = "K7XQ2M9P")]
    code: String,
    #[schema(min_length = 1, max_length = 60, example = "North gate")]
    door: String,
    #[schema(
        pattern = "^[A-Za-z0-9_-]{16,200}$",
        example = "8d1c2a7e-0b5f-4f0e-a1d2-6c3b9e4f7a10"
    )]
    nonce: String,
}

/// The answer to a scan: `result` is the reason code.
#[derive(Debug, Serialize, ToSchema)]
pub struct AnswerBody {
    #[schema(value_type = ScanResultName)]
    result: &'static str,
    code: String,
    ticket_type: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    redeemed_at: Option<OffsetDateTime>,
    door: Option<String>,
    replayed: bool,
}

impl From<Answer> for AnswerBody {
    fn from(answer: Answer) -> Self {
        Self {
            result: answer.result.as_str(),
            code: answer.code,
            ticket_type: answer.ticket_type,
            redeemed_at: answer.redeemed_at,
            door: answer.door,
            replayed: answer.replayed,
        }
    }
}

/// `POST /api/v1/organizer/events/{id}/check-ins` with `{code, door,
/// nonce}` → 200 with the answer, whatever its reason code.
#[utoipa::path(
    post,
    path = "/api/v1/organizer/events/{id}/check-ins",
    tag = "check-in",
    summary = "Redeem a ticket code at a door",
    description = "Succeeds (`result`: `ok`) exactly once per ticket. Retrying with the same `nonce` returns the first answer (`replayed`: true).",
    params(("id" = uuid::Uuid, Path, description = "The event's id")),
    request_body = RedeemRequest,
    responses(
        (status = 200, description = "The answer, whatever its reason code", body = AnswerBody),
        (status = 400, description = "Not a JSON body", body = ErrorBody),
        (status = 404, description = "You have no event with this id", body = ErrorBody),
        (status = 409, description = "The nonce was used for another code (`nonce_conflict`)", body = ErrorBody),
        (status = 422, description = "A field is invalid; `field` names it", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn redeem(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<RedeemRequest>,
) -> ApiResult<Json<AnswerBody>> {
    let event_id: EventId = parse_id(&id)?;
    lists::owned(&state.db, organizer.id, event_id).await?;
    let scan = Scan {
        event_id,
        code: TicketCode::parse(&body.code).for_field("code")?,
        door: DoorName::parse(&body.door).for_field("door")?,
        nonce: ScanNonce::parse(&body.nonce).for_field("nonce")?,
    };
    let answer = checkin::redeem(&state.db, state.clock.now(), &scan).await?;
    Ok(Json(answer.into()))
}

/// The query's parameters, refusing any not in `allowed` and repeats.
fn params<'a>(
    query: Option<&str>,
    allowed: &[&'a str],
) -> Result<Vec<(&'a str, String)>, InvalidField> {
    let mut out: Vec<(&'a str, String)> = Vec::new();
    for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        let Some(name) = allowed.iter().find(|name| **name == key) else {
            return Err(InvalidField::new(
                key.into_owned(),
                format!("Unknown parameter; this list takes {}.", allowed.join(", ")),
            ));
        };
        if out.iter().any(|(seen, _)| seen == name) {
            return Err(InvalidField::new(*name, "Give this parameter once."));
        }
        out.push((name, value.into_owned()));
    }
    Ok(out)
}

fn param<'q>(params: &'q [(&str, String)], name: &str) -> Option<&'q str> {
    params
        .iter()
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.as_str())
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TicketBody {
    code: String,
    order_id: OrderId,
    email: String,
    ticket_type: String,
    order_status: OrderStatus,
    #[serde(with = "time::serde::rfc3339::option")]
    redeemed_at: Option<OffsetDateTime>,
    door: Option<String>,
}

/// `{"tickets": [...], "next": "after-cursor" | null}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct TicketPageBody {
    tickets: Vec<TicketBody>,
    next: Option<String>,
}

impl From<TicketPage> for TicketPageBody {
    fn from(page: TicketPage) -> Self {
        Self {
            tickets: page
                .tickets
                .into_iter()
                .map(|t| TicketBody {
                    code: t.code,
                    order_id: t.order_id,
                    email: t.email,
                    ticket_type: t.ticket_type,
                    order_status: t.order_status,
                    redeemed_at: t.redeemed_at,
                    door: t.door,
                })
                .collect(),
            next: page.next,
        }
    }
}

/// `GET /api/v1/organizer/events/{id}/tickets?code_prefix=ABCD` (at least
/// four characters) or `?email=...`, with `after` (a page's `next`) and
/// `limit` (1–500, default 100).
#[utoipa::path(
    get,
    path = "/api/v1/organizer/events/{id}/tickets",
    tag = "check-in",
    summary = "Search an event's tickets by code prefix or email",
    params(
        ("id" = uuid::Uuid, Path, description = "The event's id"),
        ("code_prefix" = Option<String>, Query, min_length = 4, description = "The code's first characters (at least four); give this or `email`"),
        ("email" = Option<String>, Query, description = "The buyer's email; give this or `code_prefix`"),
        ("after" = Option<String>, Query, description = "The `next` cursor of the previous page"),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 500, description = "Tickets per page (default 100)"),
    ),
    responses(
        (status = 200, description = "A page of tickets", body = TicketPageBody),
        (status = 404, description = "You have no event with this id", body = ErrorBody),
        (status = 422, description = "A parameter is invalid, unknown or repeated, or neither or both searches are given; `field` names it", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn search_tickets(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<TicketPageBody>> {
    let event_id: EventId = parse_id(&id)?;
    lists::owned(&state.db, organizer.id, event_id).await?;
    let params = params(
        query.as_deref(),
        &["code_prefix", "email", "after", "limit"],
    )?;
    let search = match (param(&params, "code_prefix"), param(&params, "email")) {
        (Some(prefix), None) => {
            TicketQuery::CodePrefix(TicketCode::parse_prefix(prefix).for_field("code_prefix")?)
        }
        (None, Some(email)) => TicketQuery::Email(Email::parse(email).for_field("email")?),
        _ => {
            return Err(AppError::from(InvalidField::new(
                "code_prefix",
                "Search by code_prefix or by email (one of the two).",
            ))
            .into());
        }
    };
    let after = param(&params, "after")
        .map(|raw| TicketCode::parse(raw).for_field("after"))
        .transpose()?;
    let limit = page_limit(param(&params, "limit"))?;
    let page = lists::search(
        &state.db,
        organizer.id,
        event_id,
        &search,
        after.as_ref(),
        limit,
    )
    .await?;
    Ok(Json(page.into()))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CheckInBody {
    code: String,
    ticket_type: String,
    #[serde(with = "time::serde::rfc3339")]
    redeemed_at: OffsetDateTime,
    door: String,
    cursor: String,
}

/// `{"check_ins": [...], "next": cursor | null, "more": bool}`: call again
/// with `since=next` for what follows (`more` says the page was full).
#[derive(Debug, Serialize, ToSchema)]
pub struct CheckInPageBody {
    check_ins: Vec<CheckInBody>,
    next: Option<String>,
    more: bool,
}

impl From<CheckInPage> for CheckInPageBody {
    fn from(page: CheckInPage) -> Self {
        Self {
            check_ins: page
                .check_ins
                .into_iter()
                .map(|c| CheckInBody {
                    code: c.code,
                    ticket_type: c.ticket_type,
                    redeemed_at: c.redeemed_at,
                    door: c.door,
                    cursor: c.cursor.encode(),
                })
                .collect(),
            next: page.next.map(|c| c.encode()),
            more: page.more,
        }
    }
}

/// `GET /api/v1/organizer/events/{id}/check-ins?since=CURSOR&limit=N`.
#[utoipa::path(
    get,
    path = "/api/v1/organizer/events/{id}/check-ins",
    tag = "check-in",
    summary = "List the check-ins since a cursor",
    description = "For offline door devices: call again with `since` set to the last page's `next`.",
    params(
        ("id" = uuid::Uuid, Path, description = "The event's id"),
        ("since" = Option<String>, Query, description = "The `next` cursor of the previous page"),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 500, description = "Check-ins per page (default 100)"),
    ),
    responses(
        (status = 200, description = "The check-ins after the cursor", body = CheckInPageBody),
        (status = 404, description = "You have no event with this id", body = ErrorBody),
        (status = 422, description = "A parameter is invalid, unknown or repeated; `field` names it", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn list_check_ins(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<CheckInPageBody>> {
    let event_id: EventId = parse_id(&id)?;
    lists::owned(&state.db, organizer.id, event_id).await?;
    let params = params(query.as_deref(), &["since", "limit"])?;
    let since = param(&params, "since")
        .map(|raw| CheckInCursor::parse(raw).for_field("since"))
        .transpose()?;
    let limit = page_limit(param(&params, "limit"))?;
    let page = lists::since(&state.db, organizer.id, event_id, since, limit).await?;
    Ok(Json(page.into()))
}

/// A scan's reason code.
#[derive(serde::Serialize, ToSchema)]
#[schema(as = ScanResult)]
#[allow(dead_code)] // documents a `&'static str` field
#[serde(rename_all = "snake_case")]
pub enum ScanResultName {
    Ok,
    AlreadyRedeemed,
    OrderCancelled,
    WrongEvent,
    Unknown,
}
