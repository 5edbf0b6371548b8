//! Waiting lists over HTTP: joining from the event page, the links in the
//! buyer's mail, and the organizer's page with its switch. The rules are in
//! `db::waitlist`.

use axum::{
    Extension,
    extract::{Path, RawQuery, State},
    http::HeaderMap,
    response::{IntoResponse, Redirect, Response},
};
use maud::Markup;

use super::{
    AppState,
    extract::{FormFields, PageContext, confirm_token_in, parse_id},
    queue,
    views::{
        self, FormError,
        waitlist::{self as view, JoinForm},
    },
};
use crate::{
    auth::CurrentOrganizer,
    db,
    domain::{
        ConfirmToken, Email, EntryCursor, EntryQuery, EventId, ForField, InvalidField, Quantity,
        TicketTypeId, WaitlistEntryId,
    },
    error::AppError,
};

/// The token from a link's `?t=` (or a form's `t`).
fn token_in(raw: &str) -> Result<ConfirmToken, AppError> {
    confirm_token_in(raw).ok_or(AppError::Forbidden(
        "This link is not valid for this place on the waiting list.",
    ))
}

fn entry_url(entry_id: WaitlistEntryId, token: &ConfirmToken) -> String {
    format!("/waiting-list/{entry_id}?t={}", token.as_str())
}

/// `POST /events/{id}/waiting-list`: join a sold-out ticket type's list.
/// The answer is a page saying the mail is out; a refusal comes back as the
/// form, filled in, with the reason.
pub async fn join(
    State(state): State<AppState>,
    ctx: PageContext,
    Path(id): Path<String>,
    headers: HeaderMap,
    fields: FormFields,
) -> Result<Response, AppError> {
    let event_id: EventId = parse_id(&id)?;
    let mut form = JoinForm {
        ticket_type_id: fields.get("ticket_type_id").to_owned(),
        quantity: fields.get("quantity").to_owned(),
        email: fields.get("email").to_owned(),
        error: None,
    };
    let detail = state
        .events
        .published(&state.db, &state.sales, event_id)
        .await?;
    let pass = queue::cookie(&headers, &queue::pass_cookie(event_id));
    let result = match parse(&form) {
        Ok(_) if let Err(err) = check_admitted(&state, event_id, pass).await => Err(err),
        Ok((ticket_type_id, email, quantity)) => db::waitlist::join(
            &state.db,
            state.sales.confirm_key(),
            state.clock.now(),
            event_id,
            ticket_type_id,
            &email,
            quantity,
        )
        .await
        .map(|joined| (joined, email)),
        Err(invalid) => Err(invalid.into()),
    };
    let err = match result {
        Ok((_joined, email)) => {
            return Ok(view::mailed_page(&ctx, &detail, email.as_str()).into_response());
        }
        Err(err @ (AppError::Overloaded | AppError::Internal(_))) => return Err(err),
        Err(err) => err,
    };
    form.error = Some(FormError::from_app(&err));
    let mut response = (err.status(), view::join_page(&ctx, &detail, &form)).into_response();
    super::error::add_headers(&err, &mut response);
    Ok(response)
}

/// An event behind a waiting room lets only buyers the room admitted join
/// its lists (the pass cookie, as for a purchase): a returned ticket goes
/// to the list first, so the list must not be a way round the room.
async fn check_admitted(
    state: &AppState,
    event_id: EventId,
    pass: Option<&str>,
) -> Result<(), AppError> {
    let now = state.clock.now();
    let rooms = state.sales.rooms();
    if rooms.active(&state.db, event_id, now).await?.is_some() {
        rooms.key().check_pass(event_id, pass, now)?;
    }
    Ok(())
}

fn parse(form: &JoinForm) -> Result<(TicketTypeId, Email, Quantity), InvalidField> {
    let ticket_type_id = TicketTypeId::parse(&form.ticket_type_id)
        .ok_or_else(|| InvalidField::new("ticket_type_id", "Choose a ticket type."))?;
    let quantity = Quantity::parse(&form.quantity).for_field("quantity")?;
    let email = Email::parse(&form.email).for_field("email")?;
    Ok((ticket_type_id, email, quantity))
}

/// `GET /waiting-list/{id}/confirm?t=`: the link from the mail opens a
/// page whose button takes the place; the GET itself (a mail scanner's
/// fetch, a HEAD) changes nothing.
pub async fn confirm_page(
    ctx: PageContext,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Markup, AppError> {
    let entry_id: WaitlistEntryId = parse_id(&id)?;
    let token = token_in(&query.unwrap_or_default())?;
    Ok(views::mailed_link::page(
        &ctx,
        &views::mailed_link::MailedLink {
            title: "Confirm your place on the waiting list",
            explanation: "Confirm this address to take your place in line; \
                          tickets that come back are offered in that order.",
            action: format!("/waiting-list/{entry_id}/confirm"),
            token: &token,
            button: "Take my place in line",
        },
    ))
}

/// `POST /waiting-list/{id}/confirm` (`t` in the form): takes the place in
/// line (once; a second press shows the place).
pub async fn confirm(
    State(state): State<AppState>,
    Path(id): Path<String>,
    fields: FormFields,
) -> Result<Redirect, AppError> {
    let entry_id: WaitlistEntryId = parse_id(&id)?;
    let token = ConfirmToken::parse(fields.get("t")).ok_or(AppError::Forbidden(
        "This link is not valid for this place on the waiting list.",
    ))?;
    db::waitlist::confirm(&state.db, state.clock.now(), entry_id, &token).await?;
    Ok(Redirect::to(&entry_url(entry_id, &token)))
}

/// `GET /waiting-list/{id}?t=`: the place, its position, its offer.
pub async fn show(
    State(state): State<AppState>,
    ctx: PageContext,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Markup, AppError> {
    let entry_id: WaitlistEntryId = parse_id(&id)?;
    let token = token_in(&query.unwrap_or_default())?;
    let entry = db::waitlist::find(&state.db, entry_id, &token).await?;
    Ok(view::entry_page(&ctx, &entry, &token, state.clock.now()))
}

/// `POST /waiting-list/{id}/leave`: the form carries the token.
pub async fn leave(
    State(state): State<AppState>,
    Path(id): Path<String>,
    fields: FormFields,
) -> Result<Redirect, AppError> {
    let entry_id: WaitlistEntryId = parse_id(&id)?;
    let token = ConfirmToken::parse(fields.get("t")).ok_or(AppError::Forbidden(
        "This link is not valid for this place on the waiting list.",
    ))?;
    db::waitlist::leave(&state.db, entry_id, &token).await?;
    Ok(Redirect::to(&entry_url(entry_id, &token)))
}

/// `GET /organizer/events/{id}/waiting-list[?after=CURSOR]`: the lists with
/// a page of places.
pub async fn organizer_show(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    ctx: PageContext,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Markup, AppError> {
    let event_id: EventId = parse_id(&id)?;
    let page = EntryQuery::from_page(query.as_deref(), EntryCursor::parse)?;
    let detail = db::events::find_owned(&state.db, organizer.id, event_id).await?;
    let lists = db::waitlist::list(&state.db, organizer.id, event_id, &page).await?;
    Ok(view::organizer_page(
        &ctx,
        &detail,
        &lists,
        page.after.is_none(),
    ))
}

/// `POST /organizer/events/{id}/waiting-list/offers` with `offers=on|off`.
pub async fn set_offers(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
    fields: FormFields,
) -> Result<Redirect, AppError> {
    let event_id: EventId = parse_id(&id)?;
    let on = match fields.get("offers") {
        "on" => true,
        "off" => false,
        _ => {
            return Err(InvalidField::new("offers", "Choose \"on\" or \"off\".").into());
        }
    };
    db::waitlist::set_offers(&state.db, organizer.id, event_id, on, state.clock.now()).await?;
    state.events.forget(event_id).await;
    Ok(Redirect::to(&format!(
        "/organizer/events/{event_id}/waiting-list"
    )))
}
