//! An event's orders, one order, and cancelling it.

use axum::{
    Extension, Json,
    extract::{Path, RawQuery, State},
    http::StatusCode,
};

use super::{ApiResult, owned};
use crate::web::api::organizer_wire::{OrderPageBody, OrganizerOrderBody};
use crate::{
    auth::CurrentOrganizer,
    db,
    domain::{OrderQuery, OrderStatus},
    sale,
    web::{AppState, error::ErrorBody, extract::parse_id},
};

/// `GET .../orders?limit=&after=&modified_since=&status=&email=`.
#[utoipa::path(
    get,
    path = "/api/v1/organizer/events/{id}/orders",
    tag = "organizer",
    summary = "List an event's orders",
    description = "Cursor pagination in the order of each order's last change, so an incremental sync with `modified_since` sees every change once.",
    params(
        ("id" = uuid::Uuid, Path, description = "The event's id"),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 500, description = "Orders per page (default 100)"),
        ("after" = Option<String>, Query, description = "The `next` cursor of the previous page"),
        ("modified_since" = Option<String>, Query, format = DateTime, description = "Only orders created or changed at or after this RFC 3339 instant"),
        ("status" = Option<OrderStatus>, Query, description = "Only orders with this status"),
        ("email" = Option<String>, Query, description = "Only orders whose email contains this, any case"),
    ),
    responses(
        (status = 200, description = "A page of orders, oldest change first", body = OrderPageBody),
        (status = 404, description = "You have no event with this id", body = ErrorBody),
        (status = 422, description = "A parameter is invalid or unknown; `field` names it", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(in crate::web::api) async fn list_orders(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<OrderPageBody>> {
    let detail = owned(&state, &organizer, &id).await?;
    let query = OrderQuery::parse(query.as_deref())?;
    let (orders, next) =
        db::order_sync::page(&state.db, organizer.id, detail.event.id, &query).await?;
    Ok(Json(OrderPageBody::new(orders, next)))
}

/// `GET /api/v1/organizer/orders/{id}`.
#[utoipa::path(
    get,
    path = "/api/v1/organizer/orders/{id}",
    tag = "organizer",
    summary = "Read one of your orders",
    params(
        ("id" = uuid::Uuid, Path, description = "The order's id"),
    ),
    responses(
        (status = 200, description = "The order", body = OrganizerOrderBody),
        (status = 404, description = "No order of your events has this id", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(in crate::web::api) async fn get_order(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> ApiResult<Json<OrganizerOrderBody>> {
    let order = db::order_sync::find_owned(&state.db, organizer.id, parse_id(&id)?).await?;
    Ok(Json(order.into()))
}

/// `POST /api/v1/organizer/orders/{id}/cancel`: the sale path's cancel; its
/// tickets come back once (a second cancel is 409 `already_cancelled`).
#[utoipa::path(
    post,
    path = "/api/v1/organizer/orders/{id}/cancel",
    tag = "organizer",
    summary = "Cancel an order",
    params(
        ("id" = uuid::Uuid, Path, description = "The order's id"),
    ),
    responses(
        (status = 200, description = "The cancelled order; its tickets are back on sale", body = OrganizerOrderBody),
        (status = 404, description = "No order of your events has this id", body = ErrorBody),
        (status = 409, description = "Already cancelled (`already_cancelled`), or the event has started", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(in crate::web::api) async fn cancel_order(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> ApiResult<Json<OrganizerOrderBody>> {
    let order_id = parse_id(&id)?;
    let order =
        sale::cancel_by_organizer(&state.db, state.clock.now(), organizer.id, order_id).await?;
    state.events.forget_ticket_type(order.ticket_type_id).await;
    let order = db::order_sync::find_owned(&state.db, organizer.id, order_id).await?;
    Ok(Json(order.into()))
}

/// `POST /api/v1/organizer/orders/{id}/resend`: mail a confirmed order's
/// tickets to its buyer again (the same mail as at its confirmation).
#[utoipa::path(
    post,
    path = "/api/v1/organizer/orders/{id}/resend",
    tag = "organizer",
    summary = "Mail an order's tickets again",
    params(
        ("id" = uuid::Uuid, Path, description = "The order's id"),
    ),
    responses(
        (status = 202, description = "The mail is on its way (asked again within a minute: the same mail, not a second one)", body = ResendBody),
        (status = 404, description = "No order of your events has this id", body = ErrorBody),
        (status = 409, description = "The order is not confirmed (`not_confirmed`): it has no tickets", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(in crate::web::api) async fn resend_tickets(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> ApiResult<(StatusCode, Json<ResendBody>)> {
    let order_id = parse_id(&id)?;
    crate::mail::ask_resend(&state.db, organizer.id, None, order_id, state.clock.now()).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(ResendBody {
            order_id,
            status: "queued",
        }),
    ))
}

/// A resend asked for.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ResendBody {
    order_id: crate::domain::OrderId,
    /// `queued`: the mailer sends it shortly.
    status: &'static str,
}
