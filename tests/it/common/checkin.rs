//! Check-in at the door: staff links made on the dashboard, scans on the
//! scanner page and through the API, and the tables' side of a redemption.

use reqwest::{Method, Response, StatusCode};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use time::{Duration as Span, OffsetDateTime};
use uuid::Uuid;

use super::{Organizer, TestApp, api_buy, form_time, ticket_codes};

/// Create a staff link on the event's dashboard; the response of the form.
pub async fn post_door_link(
    org: &Organizer,
    event_id: Uuid,
    door: &str,
    from: OffsetDateTime,
    until: OffsetDateTime,
) -> Response {
    org.post_form(
        &format!("/organizer/events/{event_id}/door-links"),
        &[
            ("door", door),
            ("valid_from", &form_time(from)),
            ("valid_until", &form_time(until)),
        ],
    )
    .await
}

/// The staff link's secret, as the dashboard shows it once after creation.
pub fn door_secret_on_page(html: &str) -> String {
    let marker = "<code>/door?s=";
    let start = html.find(marker).expect("the new staff link is shown") + marker.len();
    let end = start + html[start..].find('<').unwrap();
    html[start..end].to_owned()
}

/// A staff link valid from an hour before `now` until a day after; its secret.
pub async fn door_link(org: &Organizer, event_id: Uuid, door: &str, now: OffsetDateTime) -> String {
    let resp = post_door_link(
        org,
        event_id,
        door,
        now - Span::hours(1),
        now + Span::days(1),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    door_secret_on_page(&resp.text().await.unwrap())
}

/// The id of the door link with this secret (by its SHA-256, as stored).
pub async fn door_link_id(pool: &PgPool, secret: &str) -> Uuid {
    sqlx::query_scalar("SELECT id FROM door_links WHERE secret_hash = $1")
        .bind(Sha256::digest(secret.as_bytes()).to_vec())
        .fetch_one(pool)
        .await
        .unwrap()
}

/// A scan on the scanner page: the form post with a nonce, and the door
/// cookie the staff link left (with the CSRF cookie).
pub async fn door_scan(app: &TestApp, secret: &str, code: &str, nonce: &str) -> Response {
    app.client
        .post(app.url("/door"))
        .header("content-type", "application/x-www-form-urlencoded")
        .header(
            "cookie",
            format!("{}; stampede_door={secret}", super::forms::csrf_cookie()),
        )
        .body(super::forms::form_body(&[("code", code), ("nonce", nonce)]))
        .send()
        .await
        .unwrap()
}

/// The reason code a scanner page shows (`data-result`), if it shows one.
pub fn result_on_page(html: &str) -> Option<String> {
    let marker = "data-result=\"";
    let start = html.find(marker)? + marker.len();
    Some(html[start..start + html[start..].find('"')?].to_owned())
}

/// A fresh nonce, as the scanner page puts in each form.
pub fn nonce() -> String {
    Uuid::new_v4().to_string()
}

/// `POST /api/v1/organizer/events/{id}/check-ins` with `org`'s token.
pub async fn api_redeem(org: &Organizer, event_id: Uuid, body: &Value) -> Response {
    org.api(
        Method::POST,
        &format!("/api/v1/organizer/events/{event_id}/check-ins"),
    )
    .json(body)
    .send()
    .await
    .unwrap()
}

/// Redeem through the API, expecting 200; the answer.
pub async fn redeem_code(
    org: &Organizer,
    event_id: Uuid,
    code: &str,
    door: &str,
    nonce: &str,
) -> Value {
    let resp = api_redeem(
        org,
        event_id,
        &json!({"code": code, "door": door, "nonce": nonce}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    resp.json().await.unwrap()
}

/// Buy `quantity` tickets of a ticket type; their codes.
pub async fn bought_codes(
    app: &TestApp,
    ticket_type_id: Uuid,
    quantity: i64,
    email: &str,
) -> Vec<String> {
    let order = api_buy(app, ticket_type_id, quantity, email).await;
    ticket_codes(&app.pool, order).await
}

/// When and at which door a ticket was redeemed, from the table.
pub async fn redeemed(pool: &PgPool, code: &str) -> (Option<OffsetDateTime>, Option<String>) {
    sqlx::query_as("SELECT redeemed_at, redeemed_door FROM tickets WHERE code = $1")
        .bind(code)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Tickets redeemed, in all.
pub async fn redeemed_count(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM tickets WHERE redeemed_at IS NOT NULL")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Scans recorded, in all.
pub async fn scan_count(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM check_in_scans")
        .fetch_one(pool)
        .await
        .unwrap()
}
