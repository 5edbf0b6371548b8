//! The organizer API v1 (issue 11): one event, its ticket types, orders
//! and stats, behind the token and scoped to its owner; the edit page's
//! rules; cursor pagination and incremental sync; the cancel that returns
//! tickets once; the per-token rate limit. Every count is read from the
//! tables. The helpers are here; a module per theme.

mod access;
mod edits;
mod orders;
mod reads;

use std::collections::{BTreeSet, HashMap};

use reqwest::{Method, Response, StatusCode};
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::{
    common::{organizer::*, *},
    http::support::*,
};

async fn send(org: &Organizer, method: Method, path: &str, body: Option<&Value>) -> Response {
    let request = org.api(method, path);
    let request = match body {
        Some(body) => request.json(body),
        None => request,
    };
    request.send().await.unwrap()
}

async fn ok_json(resp: Response) -> Value {
    let status = resp.status();
    let body: Value = resp.json().await.unwrap();
    assert!(status.is_success(), "{status}: {body}");
    body
}

fn event_path(fixture: &Fixture) -> String {
    format!("/api/v1/organizer/events/{}", fixture.event_id)
}

/// Everything a route could have written, as one comparable snapshot.
async fn tables(pool: &PgPool) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT x FROM (
             SELECT 'e ' || id || status || title || venue || starts_at || coalesce(max_per_buyer, 0) AS x FROM events
             UNION ALL SELECT 't ' || id || name || price_minor || currency || capacity || remaining
                              || max_per_order || max_per_buyer || sales_halted FROM ticket_types
             UNION ALL SELECT 'o ' || id || status || updated_at FROM orders
         ) s ORDER BY x",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

/// Every new route, with a body it would accept from its owner.
fn routes(fixture: &Fixture, order_id: Uuid) -> Vec<(Method, String, Option<Value>)> {
    let event = event_path(fixture);
    let tt = fixture.ticket_type_ids[1];
    vec![
        (Method::GET, event.clone(), None),
        (
            Method::PATCH,
            event.clone(),
            Some(json!({"title": "Renamed"})),
        ),
        (Method::POST, format!("{event}/publish"), None),
        (Method::POST, format!("{event}/unpublish"), None),
        (Method::POST, format!("{event}/cancel"), None),
        (Method::GET, format!("{event}/ticket-types"), None),
        (
            Method::POST,
            format!("{event}/ticket-types"),
            Some(json!({"name": "Late", "price_minor": 100, "currency": "EUR", "capacity": 5})),
        ),
        (
            Method::PATCH,
            format!("{event}/ticket-types/{tt}"),
            Some(json!({"capacity": 99})),
        ),
        (Method::DELETE, format!("{event}/ticket-types/{tt}"), None),
        (
            Method::POST,
            format!("{event}/ticket-types/{tt}/pause"),
            None,
        ),
        (
            Method::POST,
            format!("{event}/ticket-types/{tt}/resume"),
            None,
        ),
        (Method::GET, format!("{event}/orders"), None),
        (Method::GET, format!("{event}/stats"), None),
        (Method::GET, format!("{event}/stats/sales"), None),
        (
            Method::GET,
            format!("/api/v1/organizer/orders/{order_id}"),
            None,
        ),
        (
            Method::POST,
            format!("/api/v1/organizer/orders/{order_id}/cancel"),
            None,
        ),
    ]
}
