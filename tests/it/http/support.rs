//! Helpers shared by the modules of this test binary.

use reqwest::{Response, StatusCode};
use serde_json::{Value, json};
use sqlx::PgPool;
use time::OffsetDateTime;
use time::macros::format_description;
use uuid::Uuid;

use crate::common::*;

pub async fn get(app: &TestApp, path: &str) -> Response {
    app.client.get(app.url(path)).send().await.unwrap()
}

/// The body of a GET that must answer.
pub async fn page_text(app: &TestApp, path: &str) -> String {
    get(app, path).await.text().await.unwrap()
}

/// A page form post as the browser sends it: the CSRF cookie and the
/// matching hidden field ride along (see `stampede::web::csrf`).
pub async fn post_form(app: &TestApp, path: &str, fields: &[(&str, &str)]) -> Response {
    app.post_form(path, fields).await
}

pub async fn post_json(app: &TestApp, path: &str, body: &Value) -> Response {
    app.client
        .post(app.url(path))
        .json(body)
        .send()
        .await
        .unwrap()
}

/// An event's buy form, filled in and posted as a buyer would.
pub async fn post_buy_form(
    app: &TestApp,
    event_id: Uuid,
    ticket_type_id: &str,
    quantity: &str,
    email: &str,
    idempotency_key: &str,
) -> Response {
    let fields = [
        ("ticket_type_id", ticket_type_id),
        ("quantity", quantity),
        ("email", email),
        ("idempotency_key", idempotency_key),
    ];
    post_form(app, &format!("/events/{event_id}/orders"), &fields).await
}

/// The buy form of the fixture's event, for its first ticket type.
pub async fn buy_on_page(
    app: &TestApp,
    fixture: &Fixture,
    quantity: &str,
    email: &str,
    idempotency_key: &str,
) -> Response {
    let tt = fixture.ticket_type_id().to_string();
    post_buy_form(app, fixture.event_id, &tt, quantity, email, idempotency_key).await
}

/// A bodiless POST, as an API client sends it.
pub async fn post_empty(app: &TestApp, path: &str) -> Response {
    app.client.post(app.url(path)).send().await.unwrap()
}

/// A button-only page form (cancel, publish, ...): just the CSRF field.
pub async fn post_button(app: &TestApp, path: &str) -> Response {
    post_form(app, path, &[]).await
}

/// The order id out of a `303 See Other` to `/orders/{id}`.
pub fn order_id_from_redirect(resp: &Response) -> Uuid {
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let location = location(resp);
    let id = location
        .strip_prefix("/orders/")
        .unwrap_or_else(|| panic!("redirect to {location}, not to an order"));
    // The order that this answer created also carries its cancel secret.
    let id = id.split_once("?s=").map_or(id, |(id, _)| id);
    Uuid::parse_str(id).unwrap()
}

/// The value of the hidden idempotency key input in a rendered buy form.
pub fn idempotency_key_in(body: &str) -> String {
    let marker = "name=\"idempotency_key\" value=\"";
    let start = body.find(marker).expect("a hidden idempotency_key input") + marker.len();
    let len = body[start..].find('"').unwrap();
    body[start..start + len].to_owned()
}

pub async fn assert_api_error(
    resp: Response,
    status: StatusCode,
    code: &str,
    field: Option<&str>,
) -> Value {
    assert_eq!(resp.status(), status);
    let content_type = resp
        .headers()
        .get("content-type")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("application/json"),
        "content-type {content_type}"
    );
    let body: Value = resp.json().await.unwrap();
    let error = &body["error"];
    assert_eq!(error["code"], code, "{body}");
    match field {
        Some(field) => assert_eq!(error["field"], field, "{body}"),
        None => assert!(error["field"].is_null(), "{body}"),
    }
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "error without a message: {body}"
    );
    body
}

/// A JSON `422 invalid` error that names `field`.
pub async fn assert_invalid(resp: Response, field: &str) -> Value {
    assert_api_error(
        resp,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid",
        Some(field),
    )
    .await
}

pub async fn event_count(pool: &PgPool) -> i64 {
    count(pool, "SELECT count(*) FROM events").await
}

pub async fn ticket_type_count(pool: &PgPool) -> i64 {
    count(pool, "SELECT count(*) FROM ticket_types").await
}

pub async fn event_title(pool: &PgPool, event_id: Uuid) -> String {
    scalar(pool, "SELECT title FROM events WHERE id = $1", event_id).await
}

/// "Mon 1 Mar 2027, 19:30 UTC", the way pages show times.
pub fn shown_time(t: OffsetDateTime) -> String {
    let format = format_description!(
        "[weekday repr:short] [day padding:none] [month repr:short] [year], [hour]:[minute] UTC"
    );
    t.format(format).unwrap()
}

/// The password `TestApp::organizer` signs organizers up with.
pub const PASSWORD: &str = "correct horse battery staple";

/// Where the session middleware sends a visitor without a session:
/// `/login?next=` plus the path, urlencoded.
pub fn login_redirect(path: &str) -> String {
    format!("/login?next={}", path.replace('/', "%2F"))
}

/// The whole `Set-Cookie` header that sets `name`, if any.
pub fn set_cookie(resp: &Response, name: &str) -> Option<String> {
    resp.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(str::to_owned)
}

/// The value a `Set-Cookie` header sets.
pub fn cookie_value(header: &str) -> String {
    let pair = header.split(';').next().unwrap();
    pair.split_once('=').unwrap().1.to_owned()
}

pub fn session_id(resp: &Response) -> String {
    let header = set_cookie(resp, "stampede_session")
        .unwrap_or_else(|| panic!("no session cookie on a {} response", resp.status()));
    cookie_value(&header)
}

pub async fn get_with_session(app: &TestApp, path: &str, session: &str) -> Response {
    app.client
        .get(app.url(path))
        .header("cookie", format!("stampede_session={session}"))
        .send()
        .await
        .unwrap()
}

/// Log in through the page from a cookie-less client.
pub async fn log_in(app: &TestApp, email: &str, password: &str, next: &str) -> Response {
    app.post_form(
        "/login",
        &[("email", email), ("password", password), ("next", next)],
    )
    .await
}

pub async fn assert_unauthorized_json(resp: Response, what: &str) {
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "{what}");
    let www = resp
        .headers()
        .get("www-authenticate")
        .unwrap_or_else(|| panic!("{what}: no WWW-Authenticate"))
        .to_str()
        .unwrap()
        .to_owned();
    assert!(www.starts_with("Bearer"), "{what}: WWW-Authenticate {www}");
    let content_type = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(
        content_type.starts_with("application/json"),
        "{what}: content-type {content_type}"
    );
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unauthorized", "{what}: {body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{what}: {body}"
    );
}

/// Every table's rows (count and a digest of the contents). Columns that
/// reads legitimately touch are left out: `api_tokens.last_used_at` and the
/// sessions' data and expiry (only which sessions exist counts).
pub async fn snapshot(pool: &PgPool) -> Vec<(&'static str, i64, String)> {
    let tables = [
        ("organizers", "SELECT * FROM organizers"),
        (
            "api_tokens",
            "SELECT id, organizer_id, name, token_hash, prefix, created_at, revoked_at FROM api_tokens",
        ),
        ("events", "SELECT * FROM events"),
        ("ticket_types", "SELECT * FROM ticket_types"),
        ("orders", "SELECT * FROM orders"),
        ("tickets", "SELECT * FROM tickets"),
        ("buyer_holdings", "SELECT * FROM buyer_holdings"),
        ("sessions", "SELECT id FROM sessions"),
        ("door_links", "SELECT * FROM door_links"),
        ("check_in_scans", "SELECT * FROM check_in_scans"),
    ];
    let mut out = Vec::new();
    for (name, select) in tables {
        let (count, digest): (i64, String) = sqlx::query_as(&format!(
            "SELECT count(*), COALESCE(md5(string_agg(x::text, '|' ORDER BY x::text)), '')
             FROM ({select}) x"
        ))
        .fetch_one(pool)
        .await
        .unwrap();
        out.push((name, count, digest));
    }
    out
}

pub async fn count(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

/// (capacity, remaining, sales_halted) of every ticket type of an event.
pub async fn stock(pool: &PgPool, event_id: Uuid) -> Vec<(Uuid, i32, i32, bool)> {
    sqlx::query_as(
        "SELECT id, capacity, remaining, sales_halted FROM ticket_types
         WHERE event_id = $1 ORDER BY position",
    )
    .bind(event_id)
    .fetch_all(pool)
    .await
    .unwrap()
}

/// The id of `org`'s API token with this name.
pub async fn token_id(pool: &PgPool, organizer_id: Uuid, name: &str) -> Uuid {
    sqlx::query_scalar("SELECT id FROM api_tokens WHERE organizer_id = $1 AND name = $2")
        .bind(organizer_id)
        .bind(name)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The token a settings page shows once, right after it was created.
pub fn token_on_page(html: &str) -> String {
    let marker = "<code class=\"token\">";
    let start = html.find(marker).expect("the new token is shown") + marker.len();
    let end = start + html[start..].find('<').unwrap();
    html[start..end].to_owned()
}

/// Create an API token on the settings page and return its text.
pub async fn create_token_on_page(org: &Organizer, name: &str) -> String {
    let resp = org
        .post_form("/organizer/settings/tokens", &[("name", name)])
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    token_on_page(&resp.text().await.unwrap())
}

/// Create an event through the API with a bare bearer `token`, expecting
/// 201, and return the event's owner according to the tables.
pub async fn create_event_with_token(app: &TestApp, token: &str, title: &str) -> Option<Uuid> {
    let resp = app
        .client
        .post(app.url("/api/v1/organizer/events"))
        .bearer_auth(token)
        .json(&json!({
            "title": title, "venue": "Hall", "starts_at": "2030-03-01T19:30:00Z",
            "sale_opens_at": "2020-01-01T10:00:00Z",
            "ticket_types": [{"name": "Standing", "price_minor": 100, "currency": "EUR", "capacity": 5}],
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let created: Value = resp.json().await.unwrap();
    sqlx::query_scalar("SELECT organizer_id FROM events WHERE id = $1")
        .bind(Uuid::parse_str(created["id"].as_str().unwrap()).unwrap())
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

pub async fn list_own_events(app: &TestApp, token: &str) -> Response {
    app.client
        .get(app.url("/api/v1/organizer/events"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
}

/// The app, serving one published event whose sale is open.
pub async fn app_with_event(pool: &PgPool, specs: &[TicketSpec]) -> (TestApp, Fixture) {
    let fixture = published_event(pool, specs).await;
    (TestApp::spawn(pool.clone()).await, fixture)
}

/// The app, serving one published event with this sale window.
pub async fn app_with_window(
    pool: &PgPool,
    opens: OffsetDateTime,
    closes: Option<OffsetDateTime>,
    specs: &[TicketSpec],
) -> (TestApp, Fixture) {
    let fixture = event_with_window(pool, opens, closes, "published", specs).await;
    (TestApp::spawn(pool.clone()).await, fixture)
}

/// When an order was cancelled, if it was.
pub async fn cancelled_at(pool: &PgPool, order_id: Uuid) -> Option<OffsetDateTime> {
    scalar(
        pool,
        "SELECT cancelled_at FROM orders WHERE id = $1",
        order_id,
    )
    .await
}

/// The books after what a test did: `orders` orders in all (any status),
/// `left` tickets of `ticket_type_id` left, and the invariants hold.
pub async fn assert_books(pool: &PgPool, ticket_type_id: Uuid, orders: i64, left: i32) {
    assert_eq!(order_count(pool).await, orders, "orders in the table");
    assert_eq!(remaining(pool, ticket_type_id).await, left, "remaining");
    assert_invariants(pool).await;
}

/// A JSON order body.
pub fn order_json(ticket_type_id: Uuid, quantity: i64, email: &str, key: &str) -> Value {
    json!({
        "ticket_type_id": ticket_type_id,
        "quantity": quantity,
        "email": email,
        "idempotency_key": key,
    })
}
