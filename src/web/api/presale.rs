//! The organizer API for an event's presale codes: list them, create one
//! or a batch (`/api/v1/organizer/events/{id}/presale-codes`).

use axum::{
    Extension, Json,
    extract::{Path, RawQuery, State},
    http::StatusCode,
};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;

use crate::{
    auth::CurrentOrganizer,
    db::{self, presale::CodeSummary},
    domain::{CodeCursor, CodeInput, CodeQuery, EventId, TicketTypeId, is_guessable},
    web::{
        AppState,
        error::ApiError,
        extract::{ApiJson, parse_id},
    },
};

/// `POST` body: one code of your own (`code`), or `count` random ones.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateCodes {
    /// 4-40 letters, digits or dashes (compared in upper case); absent:
    /// `count` codes are generated.
    #[serde(default)]
    #[schema(pattern = "^\\s*[A-Za-z0-9-]{4,40}\\s*$", example = "FANCLUB-2027")]
    code: Option<String>,
    /// How many codes to generate (absent: 1); with `code`, 1.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 1000)]
    count: Option<i64>,
    /// Tickets each code may buy, in all its orders.
    #[schema(minimum = 1, maximum = 100_000)]
    max_uses: i64,
    #[serde(default)]
    #[schema(format = DateTime)]
    valid_from: Option<String>,
    /// Must be after `valid_from`.
    #[serde(default)]
    #[schema(format = DateTime)]
    valid_until: Option<String>,
    /// The event's ticket types the codes unlock (at least one).
    #[schema(min_items = 1, max_items = 20)]
    ticket_type_ids: Vec<TicketTypeId>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CodeBody {
    code: String,
    max_uses: i32,
    /// Tickets bought with it in live (held or confirmed) orders.
    used: i32,
    #[serde(with = "time::serde::rfc3339::option")]
    valid_from: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    valid_until: Option<OffsetDateTime>,
    ticket_type_ids: Vec<uuid::Uuid>,
    #[serde(with = "time::serde::rfc3339")]
    created_at: OffsetDateTime,
    /// Words, dates or patterns a guesser tries first (`FANCLUB-2027`):
    /// replace it with a generated one if it must stay secret.
    guessable: bool,
}

impl From<CodeSummary> for CodeBody {
    fn from(c: CodeSummary) -> Self {
        Self {
            guessable: is_guessable(&c.code),
            code: c.code,
            max_uses: c.max_uses,
            used: c.used,
            valid_from: c.valid_from,
            valid_until: c.valid_until,
            ticket_type_ids: c.ticket_type_ids,
            created_at: c.created_at,
        }
    }
}

/// `{"codes": [...]}`: the codes just created.
#[derive(Debug, Serialize, ToSchema)]
pub struct CodeList {
    codes: Vec<CodeBody>,
}

impl From<Vec<CodeSummary>> for CodeList {
    fn from(codes: Vec<CodeSummary>) -> Self {
        Self {
            codes: codes.into_iter().map(Into::into).collect(),
        }
    }
}

/// `{"codes": [...], "next": ...}`: a page of the event's codes.
#[derive(Debug, Serialize, ToSchema)]
pub struct CodePage {
    codes: Vec<CodeBody>,
    /// The cursor of the next page (`?after=`), or null on the last one.
    next: Option<String>,
}

/// `GET /api/v1/organizer/events/{id}/presale-codes`.
#[utoipa::path(
    get,
    path = "/api/v1/organizer/events/{id}/presale-codes",
    tag = "organizer",
    summary = "An event's presale codes, with their uses",
    description = "Cursor pagination, oldest code first.",
    params(
        ("id" = uuid::Uuid, Path, description = "The event's id"),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 500, description = "Codes per page (default 100)"),
        ("after" = Option<String>, Query, description = "The `next` cursor of the previous page"),
    ),
    responses(
        (status = 200, description = "A page of the event's codes, oldest first", body = CodePage),
        (status = 404, description = "You have no event with this id", body = crate::web::error::ErrorBody),
        (status = 422, description = "A parameter is invalid or unknown; `field` names it", body = crate::web::error::ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn list(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<CodePage>, ApiError> {
    let event_id: EventId = parse_id(&id)?;
    let query = CodeQuery::parse(query.as_deref(), CodeCursor::parse)?;
    let (codes, next) = db::presale::page(&state.db, organizer.id, event_id, &query).await?;
    Ok(Json(CodePage {
        codes: codes.into_iter().map(Into::into).collect(),
        next: next.map(|cursor| cursor.encode()),
    }))
}

/// `POST /api/v1/organizer/events/{id}/presale-codes`.
#[utoipa::path(
    post,
    path = "/api/v1/organizer/events/{id}/presale-codes",
    tag = "organizer",
    summary = "Create one presale code, or a batch of generated ones",
    params(("id" = uuid::Uuid, Path, description = "The event's id")),
    request_body = CreateCodes,
    responses(
        (status = 201, description = "The codes created", body = CodeList),
        (status = 400, description = "Not a JSON object", body = crate::web::error::ErrorBody),
        (status = 404, description = "You have no event with this id", body = crate::web::error::ErrorBody),
        (status = 422, description = "A field is wrong, the code exists already, or the event's quota of codes would be passed (`count`); `field` names it", body = crate::web::error::ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn create(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<CreateCodes>,
) -> Result<(StatusCode, Json<CodeList>), ApiError> {
    let event_id: EventId = parse_id(&id)?;
    let input = CodeInput {
        code: body.code.unwrap_or_default(),
        count: body.count.map(|n| n.to_string()).unwrap_or_default(),
        max_uses: body.max_uses.to_string(),
        valid_from: body.valid_from.unwrap_or_default(),
        valid_until: body.valid_until.unwrap_or_default(),
        ticket_type_ids: body
            .ticket_type_ids
            .iter()
            .map(ToString::to_string)
            .collect(),
    };
    let zone = db::events::zone_owned(&state.db, organizer.id, event_id).await?;
    let new = input.parse(&zone)?;
    let codes = db::presale::create(&state.db, organizer.id, event_id, &state.quotas, &new).await?;
    Ok((StatusCode::CREATED, Json(codes.into())))
}
