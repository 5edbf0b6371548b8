//! The door: the scanner page a staff link opens (`/door?s=SECRET`, no
//! account; an unknown, revoked or expired link is "not found"), and the
//! organizer's forms that create and revoke staff links on the dashboard.
//! The link's secret comes in the query once, and is exchanged at once for
//! a cookie (HttpOnly, for `/door` only) and a redirect to the bare
//! `/door`: proxies log query strings, so the secret stays in one logged
//! request at most, never in the scanner's own address or its form.

use axum::{
    Extension,
    extract::{Path, RawQuery, State},
    http::{HeaderMap, HeaderValue, header},
    response::{IntoResponse, Redirect, Response},
};

use super::{
    AppState, dashboard,
    extract::{FormFields, PageContext, parse_id},
    queue,
    views::{self, FormError, door::LinkInput},
};
use crate::{
    auth::CurrentOrganizer,
    checkin::{self, Scan, links},
    db,
    domain::{DoorLinkId, DoorSecret, EventId, ForField, InvalidField, ScanNonce, TicketCode},
    error::AppError,
};

fn secret_in_query(query: Option<&str>) -> Option<DoorSecret> {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .find(|(key, _)| key == "s")
        .and_then(|(_, value)| DoorSecret::parse(&value))
}

/// The cookie that carries a staff link's secret to the scanner.
const DOOR_COOKIE: &str = "stampede_door";
/// How long a scanner stays open without its link again: a door shift.
const DOOR_COOKIE_SECS: i64 = 12 * 3600;

/// The secret of the request: the cookie, or a form field from a scanner
/// page served before the cookie existed.
fn secret_of(headers: &HeaderMap, fields: Option<&FormFields>) -> Option<DoorSecret> {
    queue::cookie(headers, DOOR_COOKIE)
        .and_then(DoorSecret::parse)
        .or_else(|| fields.and_then(|f| DoorSecret::parse(f.get("s"))))
}

/// `GET /door?s=SECRET`: a live link's secret into the cookie, and on to
/// `GET /door`, the scanner, ready for the first code.
pub async fn scanner(
    State(state): State<AppState>,
    ctx: PageContext,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    let now = state.clock.now();
    if let Some(secret) = secret_in_query(query.as_deref()) {
        links::open(&state.db, Some(&secret), now).await?;
        let cookie = HeaderValue::from_str(&format!(
            "{DOOR_COOKIE}={}; Path=/door; Max-Age={DOOR_COOKIE_SECS}; HttpOnly; SameSite=Lax{}",
            secret.as_str(),
            if state.secure_cookies { "; Secure" } else { "" },
        ))
        .map_err(AppError::internal)?;
        let mut response = Redirect::to("/door").into_response();
        response.headers_mut().insert(header::SET_COOKIE, cookie);
        return Ok(response);
    }
    let secret = secret_of(&headers, None);
    let door = links::open(&state.db, secret.as_ref(), now).await?;
    Ok(views::door::scanner(&ctx, &door, None, "", None).into_response())
}

/// `POST /door`: redeem the typed (or scanned) code; the answer is shown
/// above a fresh form. A resubmit (same nonce) shows the first answer.
pub async fn scan(
    State(state): State<AppState>,
    ctx: PageContext,
    headers: HeaderMap,
    fields: FormFields,
) -> Result<Response, AppError> {
    let now = state.clock.now();
    let secret = secret_of(&headers, Some(&fields));
    let door = links::open(&state.db, secret.as_ref(), now).await?;
    let typed = fields.get("code");
    let refuse = |err: AppError| {
        let error = FormError::from_app(&err);
        let page = views::door::scanner(&ctx, &door, None, typed, Some(&error));
        (err.status(), page).into_response()
    };
    let parsed: Result<(TicketCode, ScanNonce), InvalidField> = (|| {
        Ok((
            TicketCode::parse(typed).for_field("code")?,
            ScanNonce::parse(fields.get("nonce")).for_field("nonce")?,
        ))
    })();
    let (code, nonce) = match parsed {
        Ok(parsed) => parsed,
        Err(invalid) => return Ok(refuse(invalid.into())),
    };
    let scan = Scan {
        event_id: door.event_id,
        code,
        door: door.door.clone(),
        nonce,
    };
    match checkin::redeem(&state.db, now, &scan).await {
        Ok(answer) => {
            Ok(views::door::scanner(&ctx, &door, Some(&answer), "", None).into_response())
        }
        Err(err @ AppError::NonceReused) => Ok(refuse(err)),
        Err(err) => Err(err),
    }
}

/// `POST /organizer/events/{id}/door-links`: the dashboard again, with the
/// new link shown once, or the form refilled with what was wrong.
pub async fn create_link(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    ctx: PageContext,
    Path(id): Path<String>,
    fields: FormFields,
) -> Result<Response, AppError> {
    let detail = db::events::find_owned(&state.db, organizer.id, parse_id(&id)?).await?;
    let input = LinkInput {
        door: fields.get("door").to_owned(),
        valid_from: fields.get("valid_from").to_owned(),
        valid_until: fields.get("valid_until").to_owned(),
    };
    let created = match links::NewDoorLink::parse(
        &detail.event.zone,
        &input.door,
        &input.valid_from,
        &input.valid_until,
    ) {
        Ok(new) => links::create(&state.db, organizer.id, detail.event.id, &new).await,
        Err(invalid) => Err(invalid.into()),
    };
    match created {
        Ok(secret) => {
            let blank = LinkInput::defaults(
                state.clock.now(),
                detail.event.starts_at,
                &detail.event.zone,
            );
            let page = dashboard::render(
                &state,
                &organizer,
                &ctx,
                &detail,
                None,
                blank,
                Some(secret),
                None,
            )
            .await?;
            Ok(page.into_response())
        }
        Err(err @ AppError::Invalid(_)) => {
            let error = FormError::from_app(&err);
            let page = dashboard::render(
                &state,
                &organizer,
                &ctx,
                &detail,
                None,
                input,
                None,
                Some(error),
            )
            .await?;
            Ok((err.status(), page).into_response())
        }
        Err(err) => Err(err),
    }
}

/// `POST /organizer/events/{id}/door-links/{link}/revoke` → the dashboard.
pub async fn revoke_link(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path((id, link)): Path<(String, String)>,
) -> Result<Redirect, AppError> {
    let event_id: EventId = parse_id(&id)?;
    let link_id: DoorLinkId = parse_id(&link)?;
    links::revoke(&state.db, organizer.id, event_id, link_id).await?;
    Ok(Redirect::to(&format!(
        "/organizer/events/{event_id}#door-links"
    )))
}
