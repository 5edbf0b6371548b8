//! A buyer's tickets outside the order page: its PDF and calendar entry to
//! download, "find my tickets" (one mail with the links of an address's
//! orders), and an organizer's resend of an order's tickets. Thin: the
//! documents and the mails are `crate::mail`'s.

use axum::{
    Extension,
    extract::{Path, RawQuery, State},
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Redirect, Response},
};
use maud::Markup;

use super::{
    AppState,
    extract::{FormFields, PageContext, order_proof, parse_id},
    views,
};
use crate::{
    auth::CurrentOrganizer,
    db,
    domain::{Email, EventId, ForField as _, OrderId},
    error::AppError,
    mail,
};

/// The order's documents, for a visitor who proves the order (its secret
/// or mailed token, as the order page); only a confirmed order has them.
async fn documents(
    state: &AppState,
    id: &str,
    query: Option<String>,
) -> Result<(OrderId, mail::Documents), AppError> {
    let order_id: OrderId = parse_id(id)?;
    let (proof, _) = order_proof(&query.unwrap_or_default(), state, order_id);
    if db::orders::tickets(&state.db, order_id, &proof)
        .await?
        .is_empty()
    {
        return Err(AppError::Forbidden(
            "Open your tickets from the order's page or the link we mailed to you.",
        ));
    }
    let facts = mail::order_facts(&state.db, order_id)
        .await?
        .filter(|facts| facts.status == "confirmed")
        .ok_or(AppError::NotFound)?;
    let public_url = state.public_url.clone();
    let now = state.clock.now();
    let rendered =
        tokio::task::spawn_blocking(move || mail::render_documents(&facts, &public_url, now))
            .await
            .map_err(AppError::internal)?
            .map_err(AppError::internal)?;
    Ok((order_id, rendered))
}

fn file(content_type: &'static str, name: String, body: Vec<u8>) -> Result<Response, AppError> {
    let disposition = HeaderValue::try_from(format!("attachment; filename=\"{name}\""))
        .map_err(AppError::internal)?;
    Ok((
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (header::CONTENT_DISPOSITION, disposition),
            // The tickets themselves: for this browser only.
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("private, no-store"),
            ),
        ],
        body,
    )
        .into_response())
}

/// `GET /orders/{id}/tickets.pdf?s=…|t=…`: a page per ticket.
pub async fn pdf(
    State(state): State<AppState>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, AppError> {
    let (order_id, documents) = documents(&state, &id, query).await?;
    file(
        "application/pdf",
        format!("tickets-{order_id}.pdf"),
        documents.pdf,
    )
}

/// `GET /orders/{id}/event.ics?s=…|t=…`: the event for the buyer's calendar.
pub async fn calendar(
    State(state): State<AppState>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, AppError> {
    let (order_id, documents) = documents(&state, &id, query).await?;
    file(
        "text/calendar; charset=utf-8",
        format!("event-{order_id}.ics"),
        documents.ics.into_bytes(),
    )
}

/// `GET /tickets`: the "find my tickets" form.
pub async fn find_form(ctx: PageContext) -> Markup {
    views::tickets::find_page(&ctx, "", None, false)
}

/// `POST /tickets`: one mail with the links of this address's orders. The
/// answer is the same whether the address has orders or not, so addresses
/// cannot be probed; the route is limited per client address, and the
/// mail per address (`mail::ask_lookup`).
pub async fn find(
    State(state): State<AppState>,
    ctx: PageContext,
    fields: FormFields,
) -> Result<Response, AppError> {
    let typed = fields.get("email");
    match Email::parse(typed).for_field("email") {
        Ok(email) => {
            mail::ask_lookup(&state.db, &email, state.clock.now()).await?;
            Ok(views::tickets::find_page(&ctx, email.as_str(), None, true).into_response())
        }
        Err(invalid) => {
            let error = views::FormError::from_app(&invalid.into());
            Ok((
                StatusCode::UNPROCESSABLE_ENTITY,
                views::tickets::find_page(&ctx, typed, Some(&error), false),
            )
                .into_response())
        }
    }
}

/// `POST /organizer/events/{id}/orders/{order}/resend`: the dashboard's
/// button; back to the dashboard's orders.
pub async fn resend_from_dashboard(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path((id, order)): Path<(String, String)>,
) -> Result<Response, AppError> {
    let event_id: EventId = parse_id(&id)?;
    let order_id: OrderId = parse_id(&order)?;
    mail::ask_resend(
        &state.db,
        organizer.id,
        Some(event_id),
        order_id,
        state.clock.now(),
    )
    .await?;
    Ok(Redirect::to(&format!("/organizer/events/{event_id}#orders-heading")).into_response())
}
