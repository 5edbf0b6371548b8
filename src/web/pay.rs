//! Paying for held tickets (`crate::payments`): the pay page, the page the
//! buyer returns to, and Stripe's webhook. Thin: the money's rules live in
//! `crate::payments`.

use axum::{
    body::Bytes,
    extract::{Path, RawQuery, State},
    http::{HeaderMap, HeaderValue, header},
    response::{IntoResponse, Redirect, Response},
};

use super::{
    extract::{PageContext, order_proof, parse_id},
    state::AppState,
    views,
};
use crate::{
    db,
    domain::{OrderId, OrderStatus, Zone},
    error::AppError,
    payments::{
        Payments, intent,
        settle::{Succeeded, settle},
        stripe::IntentStatus,
    },
};

/// An order as its pay page and its return page see it.
struct OrderToPay {
    status: OrderStatus,
    quantity: i32,
    unit_price_minor: i64,
    currency: String,
    hold_expires_at: Option<time::OffsetDateTime>,
    ticket_type_name: String,
    event_title: String,
    zone: Zone,
    /// Stripe takes the event's prices.
    takes_payment: bool,
    /// The request carries the order's secret or mailed token.
    proven: bool,
    payment_status: Option<String>,
    intent_id: Option<String>,
}

async fn order_to_pay(
    state: &AppState,
    order_id: OrderId,
    proof: &db::orders::Proof,
) -> Result<OrderToPay, AppError> {
    sqlx::query_file_as!(
        OrderToPay,
        "sql/payments/order_to_pay.sql",
        order_id.get(),
        proof.secret_hash.as_deref(),
        proof.token_hash.as_deref(),
        proof.mailed,
    )
    .fetch_optional(&state.db)
    .await?
    .ok_or(AppError::NotFound)
}

fn connected(state: &AppState) -> Result<&Payments, AppError> {
    state.payments.as_ref().ok_or(AppError::PaymentUnavailable)
}

/// `GET /orders/{id}/pay?s=…|t=…`: the pay page of a held order whose
/// price Stripe takes. Its PaymentIntent is made here, once per order. An
/// order already paid, or ended, leads to its page.
pub async fn pay_page(
    State(state): State<AppState>,
    ctx: PageContext,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, AppError> {
    let order_id: OrderId = parse_id(&id)?;
    let (proof, carry) = order_proof(&query.unwrap_or_default(), &state, order_id);
    let order = order_to_pay(&state, order_id, &proof).await?;
    if !order.proven {
        return Err(AppError::Forbidden(
            "Open the pay page from the link you got when you bought, or from our mail.",
        ));
    }
    let order_page = format!("/orders/{order_id}?{carry}");
    let now = state.clock.now();
    let still_held =
        order.status == OrderStatus::Held && order.hold_expires_at.is_some_and(|at| at > now);
    if !(order.takes_payment && order.unit_price_minor > 0 && still_held) {
        return Ok(Redirect::to(&order_page).into_response());
    }
    let payments = connected(&state)?;
    let description = format!(
        "{} × {}, {}",
        order.quantity, order.ticket_type_name, order.event_title
    );
    let open = intent::open(&state.db, payments, order_id, &description, now).await?;
    let total = order.unit_price_minor * i64::from(order.quantity);
    let return_url = format!("/orders/{order_id}/paid?{carry}");
    let page = views::pay::page(
        &ctx,
        &views::pay::PayPage {
            event_title: &order.event_title,
            ticket_type_name: &order.ticket_type_name,
            quantity: order.quantity,
            total_minor: total,
            currency: &order.currency,
            hold_expires_at: order.hold_expires_at,
            zone: &order.zone,
            publishable_key: &payments.publishable_key,
            client_secret: &open.client_secret,
            js_url: payments.js_url.as_str(),
            return_url: &return_url,
        },
        now,
    );
    let mut response = page.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_SECURITY_POLICY, pay_policy(payments));
    Ok(response)
}

/// The site's policy, plus what Stripe.js needs: its script, its frames
/// (the card field, 3-D Secure) and its API.
fn pay_policy(payments: &Payments) -> HeaderValue {
    let origin = |url: &url::Url| url.origin().ascii_serialization();
    let js = origin(&payments.js_url);
    let api = origin(&payments.api_base);
    let policy = format!(
        "default-src 'self'; script-src 'self' {js}; frame-src {js} https://hooks.stripe.com; \
         connect-src 'self' {api} {js}; img-src 'self' data: {js}; \
         frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    );
    HeaderValue::from_str(&policy).unwrap_or(HeaderValue::from_static(
        "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    ))
}

/// `GET /orders/{id}/paid?s=…|t=…`: where Stripe.js sends the buyer after
/// paying. The redirect proves nothing: Stripe is asked about the order's
/// own intent, and only its word settles; then the order's page.
pub async fn paid_return(
    State(state): State<AppState>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Redirect, AppError> {
    let order_id: OrderId = parse_id(&id)?;
    let (proof, carry) = order_proof(&query.unwrap_or_default(), &state, order_id);
    let order = order_to_pay(&state, order_id, &proof).await?;
    // Stripe is asked once per order every few seconds at most: a buyer
    // reloading this page cannot spend everyone's pacing.
    let ask = if order.proven && order.payment_status.as_deref() != Some("succeeded") {
        let mut tx = state.db.begin().await?;
        let claimed = sqlx::query_file!(
            "sql/payments/claim_return_check.sql",
            order_id.get(),
            state.clock.now()
        )
        .fetch_optional(&mut *tx)
        .await?
        .is_some();
        tx.commit().await?;
        claimed
    } else {
        false
    };
    if let (true, Some(intent_id), Some(payments)) =
        (ask, order.intent_id.as_deref(), state.payments.as_ref())
    {
        match payments.stripe.retrieve_payment_intent(intent_id).await {
            Ok(intent) if intent.status == IntentStatus::Succeeded => {
                let paid = Succeeded {
                    intent_id: &intent.id,
                    amount_minor: intent.amount,
                    currency: &intent.currency,
                };
                settle(&state.db, &paid, state.clock.now()).await?;
            }
            Ok(_) => {}
            // The webhook or the reconciler settles it.
            Err(err) => {
                tracing::warn!(%err, "could not ask Stripe about a returning buyer's payment")
            }
        }
    }
    Ok(Redirect::to(&format!("/orders/{order_id}?{carry}")))
}

/// `POST /payments/stripe/webhook`: Stripe's signed word. A bad signature
/// is 400 and writes nothing; an event of another type is 200 and ignored;
/// `payment_intent.succeeded` settles the payment (exactly once, however
/// often and in whatever order it comes). A failure to record is 500, so
/// Stripe sends it again.
pub async fn stripe_webhook(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, AppError> {
    let payments = connected(&state)?;
    let signature = headers
        .get("stripe-signature")
        .and_then(|value| value.to_str().ok());
    let now = state.clock.now();
    let event = payments
        .stripe
        .verify_webhook(signature, &body, now.unix_timestamp())
        .map_err(|err| {
            tracing::warn!(%err, "refused a Stripe webhook");
            AppError::BadSignature
        })?;
    if event.kind == "payment_intent.succeeded"
        && let Some(intent) = &event.payment_intent
        && intent.status == IntentStatus::Succeeded
    {
        let paid = Succeeded {
            intent_id: &intent.id,
            amount_minor: intent.amount,
            currency: &intent.currency,
        };
        let outcome = settle(&state.db, &paid, now).await?;
        tracing::info!(event = %event.id, ?outcome, "Stripe webhook");
    } else {
        tracing::debug!(event = %event.id, kind = %event.kind, "Stripe webhook ignored");
    }
    Ok(http::StatusCode::OK.into_response())
}
