//! The organizer API v1 under `/api/v1/organizer` (issue 11): one event,
//! its ticket types, its orders and its sales. Behind the token check and
//! the per-account rate limit (`web::mod`); every query is scoped to the
//! token's organizer, so another organizer's object is "not found". The
//! writes are the dashboard's own: the edit page's update
//! (`db::events::update`), publish and unpublish, the event's cancel, and
//! the sale path's order cancel.

//!
//! A module per resource: the event, its ticket types, its orders, its
//! sales; the lookups they share are here.

pub(super) mod event;
pub(super) mod orders;
pub(super) mod stats;
pub(super) mod ticket_types;

use axum::{
    Router,
    routing::{get, patch, post},
};

use crate::{
    auth::CurrentOrganizer,
    db::{self, events::EventDetail},
    domain::{EventId, EventInput, EventStatus, InvalidField},
    error::AppError,
    web::{AppState, error::ApiError, extract::parse_id},
};

type ApiResult<T> = Result<T, ApiError>;

/// The routes; the caller puts them behind the token check.
pub fn routes() -> Router<AppState> {
    const EVENT: &str = "/api/v1/organizer/events/{id}";
    Router::new()
        .route(EVENT, get(event::get_event).patch(event::update_event))
        .route(&format!("{EVENT}/publish"), post(event::publish))
        .route(&format!("{EVENT}/unpublish"), post(event::unpublish))
        .route(&format!("{EVENT}/cancel"), post(event::cancel_event))
        .route(
            &format!("{EVENT}/ticket-types"),
            get(ticket_types::list_ticket_types).post(ticket_types::create_ticket_type),
        )
        .route(
            &format!("{EVENT}/ticket-types/{{tt}}"),
            patch(ticket_types::update_ticket_type).delete(ticket_types::delete_ticket_type),
        )
        .route(
            &format!("{EVENT}/ticket-types/{{tt}}/pause"),
            post(super::pause::pause),
        )
        .route(
            &format!("{EVENT}/ticket-types/{{tt}}/resume"),
            post(super::pause::resume),
        )
        .route(&format!("{EVENT}/orders"), get(orders::list_orders))
        .route(&format!("{EVENT}/stats"), get(stats::stats))
        .route(
            &format!("{EVENT}/stats/sales"),
            get(stats::sales_per_minute),
        )
        .route(
            &format!("{EVENT}/presale-codes"),
            get(super::presale::list).post(super::presale::create),
        )
        .route(
            &format!("{EVENT}/waiting-list"),
            get(super::waitlist::get_lists).put(super::waitlist::put_offers),
        )
        .route(
            &format!("{EVENT}/waiting-room"),
            get(super::waiting_room::get_room).put(super::waiting_room::put_room),
        )
        .route("/api/v1/organizer/orders/{id}", get(orders::get_order))
        .route(
            "/api/v1/organizer/orders/{id}/cancel",
            post(orders::cancel_order),
        )
        .route(
            "/api/v1/organizer/orders/{id}/resend",
            post(orders::resend_tickets),
        )
}

async fn owned(
    state: &AppState,
    organizer: &CurrentOrganizer,
    id: &str,
) -> Result<EventDetail, AppError> {
    db::events::find_owned(&state.db, organizer.id, parse_id(id)?).await
}

/// An owned event that can still change.
async fn editable(
    state: &AppState,
    organizer: &CurrentOrganizer,
    id: &str,
) -> Result<EventDetail, AppError> {
    let detail = owned(state, organizer, id).await?;
    if detail.event.status == EventStatus::Cancelled {
        return Err(AppError::EventCancelled);
    }
    Ok(detail)
}

/// Parse and save `input` as the edit page does; an error about the
/// event's ticket type at `index` is renamed by `rename(index)` (a prefix
/// for the field within that row), or kept as the page names it.
async fn save(
    state: &AppState,
    organizer: &CurrentOrganizer,
    event_id: EventId,
    input: &EventInput,
    rename: impl Fn(usize) -> Option<String>,
) -> Result<(), AppError> {
    let renamed = |err: AppError| match err {
        AppError::Invalid(invalid) => AppError::Invalid(rename_field(invalid, &rename)),
        other => other,
    };
    let new = input
        .parse(&state.time_zone)
        .map_err(|e| renamed(e.into()))?;
    db::events::update(
        &state.db,
        organizer.id,
        &state.quotas,
        event_id,
        &new,
        state.clock.now(),
    )
    .await
    .map_err(renamed)?;
    state.events.forget(event_id).await;
    Ok(())
}

fn rename_field(invalid: InvalidField, rename: &impl Fn(usize) -> Option<String>) -> InvalidField {
    let renamed = invalid
        .field
        .strip_prefix("ticket_types[")
        .and_then(|rest| rest.split_once("]."))
        .and_then(|(index, field)| {
            let prefix = rename(index.parse().ok()?)?;
            Some(format!("{prefix}{field}"))
        });
    match renamed {
        Some(field) => InvalidField::new(field, invalid.message),
        None => invalid,
    }
}
