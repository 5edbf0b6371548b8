//! Events owned by a logged-in [`Organizer`], created through its API token.

use reqwest::{Method, Response, StatusCode};
use serde_json::{Value, json};
use time::{Duration as Span, OffsetDateTime, format_description::well_known::Rfc3339};
use uuid::Uuid;

use super::{Fixture, Organizer, TicketSpec};

/// When the sale of an [`owned_published_event`] opened: an hour ago.
pub fn opened() -> OffsetDateTime {
    OffsetDateTime::now_utc() - Span::hours(1)
}

/// `POST /api/v1/organizer/events` with this organizer's bearer token.
pub async fn api_create_event(org: &Organizer, body: &Value) -> Response {
    org.api(Method::POST, "/api/v1/organizer/events")
        .json(body)
        .send()
        .await
        .unwrap()
}

/// An event owned by `org`, created through its API token and shaped like
/// the fixtures of `common` ("Test concert" at "Test hall", ticket types
/// "General admission {i}" at 25.00 EUR).
pub async fn owned_event(
    org: &Organizer,
    opens: OffsetDateTime,
    status: &str,
    specs: &[TicketSpec],
) -> Fixture {
    let rfc = |t: OffsetDateTime| t.format(&Rfc3339).unwrap();
    let ticket_types: Vec<Value> = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            json!({
                "name": format!("{} {i}", spec.name),
                "price_minor": spec.price_minor,
                "currency": "EUR",
                "capacity": spec.capacity,
                "max_per_order": spec.max_per_order,
                "max_per_buyer": spec.max_per_buyer,
            })
        })
        .collect();
    let resp = api_create_event(
        org,
        &json!({
            "title": "Test concert",
            "venue": "Test hall",
            "description": "A test event",
            "starts_at": rfc(opens + Span::days(30)),
            "sale_opens_at": rfc(opens),
            "status": status,
            "payment": "offline",
            "ticket_types": ticket_types,
        }),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let body: Value = resp.json().await.unwrap();
    let id = |v: &Value| Uuid::parse_str(v.as_str().unwrap()).unwrap();
    Fixture {
        organizer_id: org.id,
        event_id: id(&body["id"]),
        ticket_type_ids: body["ticket_types"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| id(&t["id"]))
            .collect(),
    }
}

/// A published event of `org`'s whose sale opened an hour ago.
pub async fn owned_published_event(org: &Organizer, specs: &[TicketSpec]) -> Fixture {
    owned_event(org, opened(), "published", specs).await
}
