//! The sale window through HTTP, with the app's clock moved by the test
//! (`TestApp::clock`, a `ManualClock`): exactly at the opening and closing
//! instants, the event's start closing a sale without a close time, and the
//! server's time the page gives the countdown.

use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;
use time::{Duration as Span, OffsetDateTime};
use uuid::Uuid;

use crate::common::*;

/// A whole second, an hour or so from now: the fixture's times are parsed
/// from text, and a millisecond count on the page must be exact.
fn whole_second_later() -> OffsetDateTime {
    let t = now() + Span::hours(1);
    t.replace_nanosecond(0).unwrap()
}

/// Buy one ticket through the JSON API at the app's current time.
async fn try_buy(app: &TestApp, ticket_type_id: Uuid, email: &str) -> (StatusCode, Value) {
    let resp = app
        .client
        .post(app.url("/api/v1/orders"))
        .json(&json!({
            "ticket_type_id": ticket_type_id,
            "quantity": 1,
            "email": email,
            "idempotency_key": Uuid::new_v4().to_string(),
        }))
        .send()
        .await
        .unwrap();
    let status = resp.status();
    (status, resp.json().await.unwrap())
}

async fn event_page(app: &TestApp, event_id: Uuid) -> String {
    let resp = app
        .client
        .get(app.url(&format!("/events/{event_id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    resp.text().await.unwrap()
}

/// The value of `attribute="..."` on the page (panics if absent).
fn attribute(html: &str, attribute: &str) -> String {
    let start = html
        .find(&format!("{attribute}=\""))
        .unwrap_or_else(|| panic!("no {attribute} on the page"))
        + attribute.len()
        + 2;
    let end = start + html[start..].find('"').unwrap();
    html[start..end].to_owned()
}

fn millis(t: OffsetDateTime) -> String {
    (t.unix_timestamp_nanos() / 1_000_000).to_string()
}

#[sqlx::test]
async fn the_sale_opens_exactly_at_its_opening_instant(pool: PgPool) {
    let opens = whole_second_later();
    let fixture = event_with_window(
        &pool,
        opens,
        None,
        "published",
        &[TicketSpec::new(10, 2, 2)],
    )
    .await;
    let tt = fixture.ticket_type_id();
    let app = TestApp::spawn(pool.clone()).await;

    // A millisecond before: the countdown, carrying the server's clock.
    let before = opens - Span::milliseconds(1);
    app.clock.set(before);
    let page = event_page(&app, fixture.event_id).await;
    assert_eq!(attribute(&page, "data-server-now"), millis(before));
    assert_eq!(attribute(&page, "data-opens-at"), millis(opens));
    assert!(
        !page.contains("name=\"quantity\""),
        "a buy form before the opening"
    );
    let (status, body) = try_buy(&app, tt, "early@example.org").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "sale_not_open");
    // A microsecond before, too (the clock is finer than the page's).
    app.clock.set(opens - Span::microseconds(1));
    let (status, body) = try_buy(&app, tt, "early@example.org").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(order_count(&pool).await, 0);

    // At the instant: the form, and the purchase goes through.
    app.clock.set(opens);
    let page = event_page(&app, fixture.event_id).await;
    assert!(
        !page.contains("data-server-now"),
        "a countdown at the opening"
    );
    assert!(
        page.contains("name=\"quantity\""),
        "no buy form at the opening"
    );
    let (status, body) = try_buy(&app, tt, "on-time@example.org").await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(assert_invariants(&pool).await, vec![(tt, 1)]);
}

#[sqlx::test]
async fn the_sale_closes_exactly_at_its_closing_instant(pool: PgPool) {
    let opens = whole_second_later();
    let closes = opens + Span::hours(1);
    let fixture = event_with_window(
        &pool,
        opens,
        Some(closes),
        "published",
        &[TicketSpec::new(10, 2, 2)],
    )
    .await;
    let tt = fixture.ticket_type_id();
    let app = TestApp::spawn(pool.clone()).await;

    app.clock.set(closes - Span::microseconds(1));
    let (status, body) = try_buy(&app, tt, "last@example.org").await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    app.clock.set(closes);
    let page = event_page(&app, fixture.event_id).await;
    assert!(page.contains("The sale for this event has closed."));
    assert!(
        !page.contains("name=\"quantity\""),
        "a buy form after the close"
    );
    let (status, body) = try_buy(&app, tt, "too-late@example.org").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "sale_closed");
    assert_eq!(assert_invariants(&pool).await, vec![(tt, 1)]);
}

#[sqlx::test]
async fn without_a_close_time_the_sale_closes_when_the_event_starts(pool: PgPool) {
    let opens = whole_second_later();
    // The fixture's event starts 30 days after its sale opens.
    let starts = opens + Span::days(30);
    let fixture = event_with_window(
        &pool,
        opens,
        None,
        "published",
        &[TicketSpec::new(10, 2, 2)],
    )
    .await;
    let tt = fixture.ticket_type_id();
    let app = TestApp::spawn(pool.clone()).await;

    app.clock.set(starts - Span::microseconds(1));
    let (status, body) = try_buy(&app, tt, "last@example.org").await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let order_id = body["id"].as_str().unwrap().to_owned();
    let secret = body["cancel_secret"].as_str().unwrap().to_owned();

    app.clock.set(starts);
    let page = event_page(&app, fixture.event_id).await;
    assert!(page.contains("The sale for this event has closed."));
    let (status, body) = try_buy(&app, tt, "at-the-door@example.org").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "sale_closed");

    // Nor can the buyer cancel once it has started: 409, nothing moves.
    let resp = app
        .client
        .post(app.url(&format!("/api/v1/orders/{order_id}/cancel?s={secret}")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CONFLICT);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "event_started", "{body}");
    assert_eq!(assert_invariants(&pool).await, vec![(tt, 1)]);
    assert_eq!(
        order_status(&pool, Uuid::parse_str(&order_id).unwrap()).await,
        "confirmed"
    );
}
