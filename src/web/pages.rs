//! Buyer pages: thin handlers around `sale` and `db`.

use axum::{
    Extension,
    extract::{ConnectInfo, Path, RawQuery, State},
    response::{IntoResponse, Redirect, Response},
};
use maud::Markup;
use std::{net::SocketAddr, sync::Arc};

use axum::http::HeaderMap;
use time::OffsetDateTime;

use super::{
    AppState,
    extract::{FormFields, PageContext, confirm_token_in, order_proof, parse_id},
    list_cache::EventPage,
    queue,
    views::{
        self, FormError,
        events::{BuyForm, RoomGate},
    },
};
use crate::{
    db::{self, events::EventDetail},
    domain::{
        CancelSecret, ClientKey, ConfirmToken, Email, EventCursor, EventId, ForField,
        IdempotencyKey, InvalidField, OrderId, PresaleCode, Quantity, TicketTypeId, optional_code,
    },
    error::AppError,
    sale::{self, PurchaseRequest},
    waiting_room::Room,
};

/// `/[?after=cursor]`: a page of upcoming events.
pub async fn index(
    State(state): State<AppState>,
    ctx: PageContext,
    RawQuery(query): RawQuery,
) -> Result<Markup, AppError> {
    let page = public_page(&state, query.as_deref()).await?;
    Ok(views::events::index(&ctx, &page.events, page.next))
}

/// The page of the public list that `?after=` names, through the shared
/// cache (both `/` and `/api/v1/events` read it).
pub async fn public_page(
    state: &AppState,
    query: Option<&str>,
) -> Result<Arc<EventPage>, AppError> {
    let after = form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .find(|(key, _)| key == "after")
        .map(|(_, value)| value.into_owned());
    let cursor = EventCursor::parse(after.as_deref())?;
    let now = state.clock.now();
    state
        .public_list
        .get(cursor, || async move {
            let (events, next) = db::events::list_published_page(&state.db, now, cursor).await?;
            Ok(EventPage { events, next })
        })
        .await
}

pub async fn event(
    State(state): State<AppState>,
    ctx: PageContext,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    connect: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
) -> Result<Markup, AppError> {
    let event_id: EventId = parse_id(&id)?;
    let now = state.clock.now();
    // A presale link (`?code=`) fills the form in and shows what it unlocks.
    let presale_code = form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .find(|(key, _)| key == "code")
        .map(|(_, value)| value.into_owned())
        .unwrap_or_default();
    let detail = state
        .events
        .published(&state.db, &state.sales, event_id)
        .await?;
    let client = queue::client(connect).map(ClientKey::of);
    let detail = match optional_code(&presale_code) {
        Ok(Some(code)) => {
            // A guess costs a read: behind the guard, and counted if wrong.
            state.code_guard.check(client, event_id.get(), now)?;
            match with_unlocked(&state, &detail, &code, now).await? {
                Some(shown) => shown,
                None => {
                    state.code_guard.failed(client, event_id.get(), now);
                    detail
                }
            }
        }
        _ => detail,
    };
    let form = BuyForm {
        idempotency_key: IdempotencyKey::generate().as_str().to_owned(),
        presale_code,
        ..BuyForm::default()
    };
    let room = state
        .sales
        .rooms()
        .active(&state.db, event_id, state.clock.now())
        .await?;
    let gate = room
        .as_deref()
        .map(|room| room_gate(&state, &headers, room, now));
    Ok(views::events::page(&ctx, &detail, now, &form, gate))
}

/// How a queued event's page looks to this buyer (from their cookies; the
/// shared cache holds only what every buyer sees).
fn room_gate<'a>(
    state: &AppState,
    headers: &HeaderMap,
    room: &'a Room,
    now: OffsetDateTime,
) -> RoomGate<'a> {
    let event_id = room.event_id;
    RoomGate {
        room,
        holds_pass: queue::holds_pass(state, headers, event_id, now),
        can_join: now >= room.prequeue_opens_at(),
        in_queue: queue::cookie(headers, &queue::entry_cookie(event_id))
            .and_then(|token| {
                state
                    .sales
                    .rooms()
                    .key()
                    .verify_entry_token(event_id, token)
            })
            .is_some(),
    }
}

/// POST → 303 → GET: a refresh of the order page never buys again, and a
/// resubmitted form carries the same idempotency key, so it finds the same order.
pub async fn buy(
    State(state): State<AppState>,
    ctx: PageContext,
    Path(id): Path<String>,
    connect: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    fields: FormFields,
) -> Result<Response, AppError> {
    let event_id: EventId = parse_id(&id)?;
    let mut form = BuyForm {
        ticket_type_id: fields.get("ticket_type_id").to_owned(),
        quantity: fields.get("quantity").to_owned(),
        email: fields.get("email").to_owned(),
        idempotency_key: fields.get("idempotency_key").to_owned(),
        presale_code: fields.get("presale_code").to_owned(),
        error: None,
    };
    let now = state.clock.now();
    let pass = queue::cookie(&headers, &queue::pass_cookie(event_id)).map(str::to_owned);
    let result = match purchase_request(event_id, &form) {
        Ok(mut request) => {
            request.pass = pass;
            request.client = queue::client(connect).map(ClientKey::of);
            state.purchase(&request).await
        }
        Err(invalid) => Err(invalid.into()),
    };
    let err = match result {
        Ok(purchase) => {
            let to = order_url(purchase.order().id, purchase.cancel_secret());
            return Ok(Redirect::to(&to).into_response());
        }
        Err(err @ (AppError::Overloaded | AppError::Internal(_))) => return Err(err),
        Err(err) => err,
    };
    // Back to the event page, filled in, with the reason.
    let detail = state
        .events
        .published(&state.db, &state.sales, event_id)
        .await?;
    // The code unlocks its hidden types again, unless the guard held it
    // back (then its answer must not come from here either).
    let detail = match optional_code(&form.presale_code) {
        Ok(Some(code)) if !matches!(err, AppError::TooManyRequests { .. }) => {
            with_unlocked(&state, &detail, &code, now)
                .await?
                .unwrap_or(detail)
        }
        _ => detail,
    };
    // A conflicting key stays in conflict: give the corrected form a new one.
    if IdempotencyKey::parse(&form.idempotency_key).is_err()
        || matches!(err, AppError::IdempotencyConflict)
    {
        form.idempotency_key = IdempotencyKey::generate().as_str().to_owned();
    }
    form.error = Some(FormError::from_app(&err));
    let room = state
        .sales
        .rooms()
        .active(&state.db, event_id, state.clock.now())
        .await?;
    let gate = room
        .as_deref()
        .map(|room| room_gate(&state, &headers, room, now));
    let mut response = (
        err.status(),
        views::events::page(&ctx, &detail, now, &form, gate),
    )
        .into_response();
    super::error::add_headers(&err, &mut response);
    Ok(response)
}

fn purchase_request(event_id: EventId, form: &BuyForm) -> Result<PurchaseRequest, InvalidField> {
    let ticket_type_id = TicketTypeId::parse(&form.ticket_type_id)
        .ok_or_else(|| InvalidField::new("ticket_type_id", "Choose a ticket type."))?;
    Ok(PurchaseRequest {
        event_id: Some(event_id),
        ticket_type_id,
        quantity: Quantity::parse(&form.quantity).for_field("quantity")?,
        email: Email::parse(&form.email).for_field("email")?,
        idempotency_key: IdempotencyKey::parse(&form.idempotency_key)
            .for_field("idempotency_key")?,
        pass: None,
        queue_entry: None,
        presale_code: optional_code(&form.presale_code)?,
        client: None,
    })
}

/// The event as a buyer with this presale code sees it: with the hidden
/// ticket types the code unlocks now; `None` when it unlocks none.
async fn with_unlocked(
    state: &AppState,
    detail: &EventDetail,
    code: &PresaleCode,
    now: OffsetDateTime,
) -> Result<Option<Arc<EventDetail>>, AppError> {
    let unlocked = db::presale::unlocked_hidden(&state.db, detail.event.id, code, now).await?;
    if unlocked.is_empty() {
        return Ok(None);
    }
    let Some(full) = db::events::find(&state.db, detail.event.id).await? else {
        return Ok(None);
    };
    let mut shown = EventDetail::clone(detail);
    shown.ticket_types = full
        .ticket_types
        .into_iter()
        .filter(|t| !t.hidden || unlocked.contains(&t.id))
        .collect();
    Ok(Some(Arc::new(shown)))
}

/// The order page's address; with the cancel secret, the one that can cancel.
pub fn order_url(order_id: OrderId, secret: Option<&CancelSecret>) -> String {
    match secret {
        Some(secret) => format!("/orders/{order_id}?s={}", secret.as_str()),
        None => format!("/orders/{order_id}"),
    }
}

/// `s` from a query string or form, as a cancel secret.
fn secret_in(pairs: &[u8]) -> Option<CancelSecret> {
    form_urlencoded::parse(pairs)
        .find(|(key, _)| key == "s")
        .and_then(|(_, value)| CancelSecret::parse(&value))
}

/// `/orders/{id}[?s=secret|?t=token]`: the order. Its ticket codes show
/// only with a proof: the cancel secret (the page the purchase led to) or
/// the confirmation token (the link mailed to the buyer). The order id
/// alone shows the status and no code.
pub async fn order(
    State(state): State<AppState>,
    ctx: PageContext,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Markup, AppError> {
    let order_id: OrderId = parse_id(&id)?;
    let query = query.unwrap_or_default();
    let secret = secret_in(query.as_bytes());
    let (proof, carry) = order_proof(&query, &state, order_id);
    let (order, context, tickets, payment) = tokio::try_join!(
        sale::find_by_id(&state.db, order_id),
        db::orders::context(&state.db, order_id),
        db::orders::tickets(&state.db, order_id, &proof),
        crate::payments::state::of_order(&state.db, order_id)
    )?;
    let order = order.ok_or(AppError::NotFound)?;
    Ok(views::orders::page(
        &ctx,
        &order,
        &context,
        &tickets,
        &views::orders::Visitor {
            secret: secret.as_ref(),
            proof_query: &carry,
        },
        &payment,
        state.clock.now(),
    ))
}

/// `GET /orders/{id}/confirm?t=token`: the link from a held order's mail
/// opens a page whose button confirms; the GET (and a HEAD, and a mail
/// scanner's fetch) changes nothing.
/// An order whose price Stripe takes is confirmed by paying: its link
/// leads to the pay page.
pub async fn confirm_page(
    State(state): State<AppState>,
    ctx: PageContext,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, AppError> {
    let order_id: OrderId = parse_id(&id)?;
    let token = confirm_token_in(&query.unwrap_or_default()).ok_or(AppError::Forbidden(
        "This confirmation link is not valid for this order.",
    ))?;
    if crate::payments::state::of_order(&state.db, order_id)
        .await?
        .takes_payment
    {
        let to = format!("/orders/{order_id}/pay?t={}", token.as_str());
        return Ok(Redirect::to(&to).into_response());
    }
    Ok(views::mailed_link::page(
        &ctx,
        &views::mailed_link::MailedLink {
            title: "Confirm your tickets",
            explanation: "Your tickets are held for you until you confirm. Confirm now to get them.",
            action: format!("/orders/{order_id}/confirm"),
            token: &token,
            button: "Confirm my tickets",
        },
    )
    .into_response())
}

/// `POST /orders/{id}/confirm` (the button of `confirm_page`, `t` in the
/// form): confirms once; a second press lands on the confirmed order too.
/// A press after the hold ended says so (410), and so does a race lost to
/// the sweeper. The order page it leads to carries the token: the buyer
/// proved the mailbox, so the codes show.
pub async fn confirm(
    State(state): State<AppState>,
    Path(id): Path<String>,
    fields: FormFields,
) -> Result<Redirect, AppError> {
    let order_id: OrderId = parse_id(&id)?;
    let token = ConfirmToken::parse(fields.get("t")).ok_or(AppError::Forbidden(
        "This confirmation link is not valid for this order.",
    ))?;
    sale::confirm(&state.db, state.clock.now(), order_id, &token).await?;
    Ok(Redirect::to(&format!(
        "/orders/{order_id}?t={}",
        token.as_str()
    )))
}

/// The buyer's cancel: the form carries the secret from the page's URL.
pub async fn cancel(
    State(state): State<AppState>,
    Path(id): Path<String>,
    fields: FormFields,
) -> Result<Redirect, AppError> {
    let order_id: OrderId = parse_id(&id)?;
    let secret = CancelSecret::parse(fields.get("s"));
    match sale::cancel(&state.db, state.clock.now(), order_id, secret.as_ref()).await {
        Ok(order) => {
            // Its tickets are back: the buyer sees them on the event page.
            state.events.forget_ticket_type(order.ticket_type_id).await;
            Ok(Redirect::to(&order_url(order_id, secret.as_ref())))
        }
        // A double click on "Cancel" lands on the cancelled order as well.
        Err(AppError::AlreadyCancelled) => Ok(Redirect::to(&order_url(order_id, secret.as_ref()))),
        Err(err) => Err(err),
    }
}
