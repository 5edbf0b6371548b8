mod common;

// Organizer accounts over real HTTP: who may reach which organizer route,
// CSRF on every state-changing form, sign-up / log-in / log-out, the log-in
// rate limit, API tokens, the `stampede organizer add` command, cancelling
// an event (also while buyers race it) and the tickets on the order page.
// Every refusal is checked against the tables, not only the status code.

use std::{
    collections::BTreeSet,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use base64::Engine as _;
use common::{
    CSRF_TOKEN, Organizer, TestApp, TicketSpec, api_buy, assert_invariants, csrf_cookie,
    database_url, encode, event_status, form_time, form_urlencoded_pairs, location,
    organizer::{opened, owned_event},
    published_event, ticket_codes,
};
use reqwest::{Method, Response, StatusCode};
use serde_json::{Value, json};
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use stampede::{
    domain::{Email, IdempotencyKey, Quantity},
    error::AppError,
    sale::{self, Purchase, PurchaseRequest},
};
use time::{Duration as Span, OffsetDateTime};
use tokio::sync::{Barrier, Notify};
use uuid::Uuid;

/// The password `TestApp::organizer` signs organizers up with.
const PASSWORD: &str = "correct horse battery staple";

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

fn owned_fields(fields: &[(&str, &str)]) -> Vec<(String, String)> {
    fields
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn borrowed(fields: &[(String, String)]) -> Vec<(&str, &str)> {
    fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

/// Where the session middleware sends a visitor without a session:
/// `/login?next=` plus the path, urlencoded.
fn login_redirect(path: &str) -> String {
    format!("/login?next={}", path.replace('/', "%2F"))
}

/// The whole `Set-Cookie` header that sets `name`, if any.
fn set_cookie(resp: &Response, name: &str) -> Option<String> {
    resp.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(str::to_owned)
}

/// The value a `Set-Cookie` header sets.
fn cookie_value(header: &str) -> String {
    let pair = header.split(';').next().unwrap();
    pair.split_once('=').unwrap().1.to_owned()
}

fn session_id(resp: &Response) -> String {
    let header = set_cookie(resp, "stampede_session")
        .unwrap_or_else(|| panic!("no session cookie on a {} response", resp.status()));
    cookie_value(&header)
}

/// A form post from a browser without a cookie jar: the CSRF cookie plus
/// any other cookies given, and the CSRF field.
async fn post_with_cookies(
    app: &TestApp,
    path: &str,
    fields: &[(&str, &str)],
    cookies: &[(&str, &str)],
) -> Response {
    let mut cookie = csrf_cookie();
    for (name, value) in cookies {
        cookie.push_str(&format!("; {name}={value}"));
    }
    app.client
        .post(app.url(path))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("cookie", cookie)
        .body(common::form_body(fields))
        .send()
        .await
        .unwrap()
}

async fn get_with_session(app: &TestApp, path: &str, session: &str) -> Response {
    app.client
        .get(app.url(path))
        .header("cookie", format!("stampede_session={session}"))
        .send()
        .await
        .unwrap()
}

/// Log in through the page from a cookie-less client.
async fn log_in(app: &TestApp, email: &str, password: &str, next: &str) -> Response {
    app.post_form(
        "/login",
        &[("email", email), ("password", password), ("next", next)],
    )
    .await
}

async fn assert_unauthorized_json(resp: Response, what: &str) {
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
async fn snapshot(pool: &PgPool) -> Vec<(&'static str, i64, String)> {
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

async fn count(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

/// (capacity, remaining, sales_halted) of every ticket type of an event.
async fn stock(pool: &PgPool, event_id: Uuid) -> Vec<(Uuid, i32, i32, bool)> {
    sqlx::query_as(
        "SELECT id, capacity, remaining, sales_halted FROM ticket_types
         WHERE event_id = $1 ORDER BY position",
    )
    .bind(event_id)
    .fetch_all(pool)
    .await
    .unwrap()
}

/// A valid edit form for an event made by [`owned_event`] with one ticket type.
fn edit_fields(ticket_type_id: Uuid, title: &str, capacity: &str) -> Vec<(String, String)> {
    let opens = opened();
    owned_fields(&[
        ("title", title),
        ("venue", "Test hall"),
        ("description", "A test event"),
        ("starts_at", &form_time(opens + Span::days(30))),
        ("sale_opens_at", &form_time(opens)),
        ("sale_closes_at", ""),
        ("tt_id_0", &ticket_type_id.to_string()),
        ("tt_name_0", "General admission 0"),
        ("tt_price_0", "25.00"),
        ("tt_currency_0", "EUR"),
        ("tt_capacity_0", capacity),
        ("tt_max_per_order_0", "4"),
        ("tt_max_per_buyer_0", "8"),
    ])
}

/// A valid form for a new, published event.
fn new_event_fields(title: &str) -> Vec<(String, String)> {
    owned_fields(&[
        ("title", title),
        ("venue", "Main hall"),
        ("description", "An evening of tests."),
        ("starts_at", "2030-03-01T19:30"),
        ("sale_opens_at", "2020-01-01T10:00"),
        ("sale_closes_at", ""),
        ("status", "published"),
        ("tt_name_0", "Standing"),
        ("tt_price_0", "25.00"),
        ("tt_currency_0", "EUR"),
        ("tt_capacity_0", "120"),
        ("tt_max_per_order_0", "4"),
        ("tt_max_per_buyer_0", "6"),
    ])
}

/// The id of `org`'s API token with this name.
async fn token_id(pool: &PgPool, organizer_id: Uuid, name: &str) -> Uuid {
    sqlx::query_scalar("SELECT id FROM api_tokens WHERE organizer_id = $1 AND name = $2")
        .bind(organizer_id)
        .bind(name)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The token a settings page shows once, right after it was created.
fn token_on_page(html: &str) -> String {
    let marker = "<code class=\"token\">";
    let start = html.find(marker).expect("the new token is shown") + marker.len();
    let end = start + html[start..].find('<').unwrap();
    html[start..end].to_owned()
}

/// Create an API token on the settings page and return its text.
async fn create_token_on_page(org: &Organizer, name: &str) -> String {
    let resp = org
        .post_form("/organizer/settings/tokens", &[("name", name)])
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    token_on_page(&resp.text().await.unwrap())
}

/// Create an event through the API with a bare bearer `token`, expecting
/// 201, and return the event's owner according to the tables.
async fn create_event_with_token(app: &TestApp, token: &str, title: &str) -> Option<Uuid> {
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

async fn list_own_events(app: &TestApp, token: &str) -> Response {
    app.client
        .get(app.url("/api/v1/organizer/events"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
}

// ---------------------------------------------------------------------------
// Without a session or a token
// ---------------------------------------------------------------------------

#[sqlx::test]
async fn every_organizer_page_without_a_session_redirects_to_log_in_and_writes_nothing(
    pool: PgPool,
) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 8)]).await;
    let app = TestApp::spawn(pool.clone()).await;
    // A real token id, so that a missing check could revoke something.
    let org = app.organizer("someone@example.org").await;
    let token = token_id(&pool, org.id, "tests").await;
    let event = fixture.event_id;
    let edit = edit_fields(fixture.ticket_type_id(), "Taken over", "99");
    let new_event = new_event_fields("Planted");

    // Every route under /organizer in src/web/mod.rs.
    let get_routes = [
        "/organizer".to_owned(),
        "/organizer/events/new".to_owned(),
        format!("/organizer/events/{event}"),
        format!("/organizer/events/{event}/edit"),
        format!("/organizer/events/{event}/orders.csv"),
        "/organizer/settings".to_owned(),
    ];
    let post_routes: Vec<(String, Vec<(String, String)>)> = vec![
        ("/organizer/events".to_owned(), new_event.clone()),
        (format!("/organizer/events/{event}/edit"), edit.clone()),
        (format!("/organizer/events/{event}/publish"), vec![]),
        (format!("/organizer/events/{event}/unpublish"), vec![]),
        (format!("/organizer/events/{event}/cancel"), vec![]),
        (
            "/organizer/settings/tokens".to_owned(),
            owned_fields(&[("name", "planted")]),
        ),
        (format!("/organizer/settings/tokens/{token}/revoke"), vec![]),
    ];

    let before = snapshot(&pool).await;
    // No session cookie at all, and a session cookie the store never issued.
    for session in [None, Some("not-a-session-id")] {
        for path in &get_routes {
            let mut request = app.client.get(app.url(path));
            if let Some(session) = session {
                request = request.header("cookie", format!("stampede_session={session}"));
            }
            let resp = request.send().await.unwrap();
            assert_eq!(resp.status(), StatusCode::SEE_OTHER, "GET {path}");
            assert_eq!(location(&resp), login_redirect(path), "GET {path}");
        }
        for (path, fields) in &post_routes {
            // A valid CSRF token: the session check alone must refuse.
            let cookies: Vec<(&str, &str)> = session
                .map(|s| ("stampede_session", s))
                .into_iter()
                .collect();
            let resp = post_with_cookies(&app, path, &borrowed(fields), &cookies).await;
            assert_eq!(resp.status(), StatusCode::SEE_OTHER, "POST {path}");
            assert_eq!(location(&resp), login_redirect(path), "POST {path}");
        }
    }
    assert_eq!(snapshot(&pool).await, before, "an anonymous request wrote");

    // The log-in page carries `next` on to the form.
    let resp = app
        .client
        .get(app.url(&login_redirect("/organizer/settings")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let body = resp.text().await.unwrap();
    assert!(
        body.contains("name=\"next\" value=\"/organizer/settings\""),
        "{body}"
    );
}

#[sqlx::test]
async fn every_organizer_api_route_refuses_a_missing_garbage_or_revoked_token_with_401_json(
    pool: PgPool,
) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("api@example.org").await;
    let revoked = create_token_on_page(&org, "old script").await;
    let revoked_id = token_id(&pool, org.id, "old script").await;
    let resp = org
        .post_form(
            &format!("/organizer/settings/tokens/{revoked_id}/revoke"),
            &[],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let body = json!({
        "title": "Unauthorized", "venue": "Nowhere",
        "starts_at": "2030-03-01T19:30:00Z", "sale_opens_at": "2020-01-01T10:00:00Z",
        "status": "published",
        "ticket_types": [{"name": "Standing", "price_minor": 100, "currency": "EUR", "capacity": 5}],
    });

    let lookalike = format!("stp_{}", "A".repeat(43));
    let authorizations = [
        None,
        Some(String::new()),
        Some("Bearer".to_owned()),
        Some("Bearer ".to_owned()),
        Some("Bearer garbage".to_owned()),
        Some(format!("Bearer {lookalike}")),
        Some(format!("Bearer {revoked}")),
        // The live token, but not as a bearer token.
        Some(org.api_token.clone()),
        Some(format!("Basic {}", org.api_token)),
        Some(format!("Token {}", org.api_token)),
    ];
    let before = snapshot(&pool).await;
    for authorization in &authorizations {
        for method in [Method::GET, Method::POST] {
            let mut request = app
                .client
                .request(method.clone(), app.url("/api/v1/organizer/events"))
                .json(&body);
            if let Some(authorization) = authorization {
                request = request.header("authorization", authorization);
            }
            let resp = request.send().await.unwrap();
            assert_unauthorized_json(resp, &format!("{method} with {authorization:?}")).await;
        }
    }
    assert_eq!(snapshot(&pool).await, before, "a refused API call wrote");
    assert_eq!(count(&pool, "SELECT count(*) FROM events").await, 0);

    // The organizer's live token is let through on both routes.
    let resp = org
        .api(Method::GET, "/api/v1/organizer/events")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let resp = org
        .api(Method::POST, "/api/v1/organizer/events")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
}

// ---------------------------------------------------------------------------
// Ownership
// ---------------------------------------------------------------------------

#[sqlx::test]
async fn another_organizer_gets_404_on_every_route_of_an_event_it_does_not_own_and_nothing_changes(
    pool: PgPool,
) {
    let app = TestApp::spawn(pool.clone()).await;
    let owner = app.organizer("owner@example.org").await;
    let intruder = app.organizer("intruder@example.org").await;
    let draft = owned_event(&owner, opened(), "draft", &[TicketSpec::new(10, 4, 8)]).await;
    let published = owned_event(&owner, opened(), "published", &[TicketSpec::new(10, 4, 8)]).await;
    api_buy(&app, published.ticket_type_id(), 2, "buyer@example.org").await;
    // Events of the fixture organizer (no password at all) are foreign too.
    let foreign = published_event(&pool, &[TicketSpec::new(10, 4, 8)]).await;

    let before = snapshot(&pool).await;
    for fixture in [&draft, &published, &foreign] {
        let event = fixture.event_id;
        for path in [
            format!("/organizer/events/{event}"),
            format!("/organizer/events/{event}/edit"),
            format!("/organizer/events/{event}/orders.csv"),
        ] {
            let resp = intruder.get(&path).await;
            assert_eq!(resp.status(), StatusCode::NOT_FOUND, "GET {path}");
            let body = resp.text().await.unwrap();
            assert!(!body.contains("buyer@example.org"), "GET {path}: {body}");
        }
        let edit = edit_fields(fixture.ticket_type_id(), "Taken over", "99");
        for (path, fields) in [
            (format!("/organizer/events/{event}/edit"), edit),
            (format!("/organizer/events/{event}/publish"), vec![]),
            (format!("/organizer/events/{event}/unpublish"), vec![]),
            (format!("/organizer/events/{event}/cancel"), vec![]),
        ] {
            let resp = intruder.post_form(&path, &borrowed(&fields)).await;
            assert_eq!(resp.status(), StatusCode::NOT_FOUND, "POST {path}");
        }
    }
    assert_eq!(
        snapshot(&pool).await,
        before,
        "another organizer changed an event"
    );

    // Nor does the intruder see them listed, on the page or in the API.
    let overview = intruder.get("/organizer").await.text().await.unwrap();
    let listed: Value = intruder
        .api(Method::GET, "/api/v1/organizer/events")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["events"], json!([]), "{listed}");
    for fixture in [&draft, &published, &foreign] {
        assert!(
            !overview.contains(&fixture.event_id.to_string()),
            "{overview}"
        );
    }

    // The owner reaches the same routes.
    for fixture in [&draft, &published] {
        for path in [
            format!("/organizer/events/{}", fixture.event_id),
            format!("/organizer/events/{}/edit", fixture.event_id),
            format!("/organizer/events/{}/orders.csv", fixture.event_id),
        ] {
            assert_eq!(owner.get(&path).await.status(), StatusCode::OK, "{path}");
        }
    }
    let listed: Value = owner
        .api(Method::GET, "/api/v1/organizer/events")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: BTreeSet<&str> = listed["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    let expected: BTreeSet<String> = [draft.event_id, published.event_id]
        .iter()
        .map(Uuid::to_string)
        .collect();
    assert_eq!(
        ids,
        expected.iter().map(String::as_str).collect::<BTreeSet<_>>()
    );
}

#[sqlx::test]
async fn an_organizer_cannot_revoke_another_organizers_token(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let owner = app.organizer("owner@example.org").await;
    let intruder = app.organizer("intruder@example.org").await;
    let token = token_id(&pool, owner.id, "tests").await;

    let resp = intruder
        .post_form(&format!("/organizer/settings/tokens/{token}/revoke"), &[])
        .await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let revoked: Option<OffsetDateTime> =
        sqlx::query_scalar("SELECT revoked_at FROM api_tokens WHERE id = $1")
            .bind(token)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(revoked, None);
    assert_eq!(
        list_own_events(&app, &owner.api_token).await.status(),
        StatusCode::OK
    );
    // The intruder's settings page does not list it either.
    let settings = intruder
        .get("/organizer/settings")
        .await
        .text()
        .await
        .unwrap();
    assert!(!settings.contains(&token.to_string()), "{settings}");
    assert!(!settings.contains(&owner.api_token[..10]), "{settings}");
}

// ---------------------------------------------------------------------------
// CSRF
// ---------------------------------------------------------------------------

/// One state-changing page form, ready to post from its browser.
struct FormPost {
    what: &'static str,
    client: reqwest::Client,
    url: String,
    fields: Vec<(String, String)>,
    /// The CSRF cookie header for clients without a cookie jar; `None` when
    /// the client's jar already holds it.
    cookie: Option<String>,
    token: String,
    success: StatusCode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Csrf {
    Valid,
    MissingField,
    WrongField,
    MissingCookie,
}

impl FormPost {
    async fn send(&self, csrf: Csrf, headers: &[(&str, &str)]) -> Response {
        let mut body = form_urlencoded_pairs(&borrowed(&self.fields));
        let wrong = format!("{}wrongtoken1", Uuid::new_v4().simple());
        match csrf {
            Csrf::Valid | Csrf::MissingCookie => {
                body.push_str(&format!("&csrf_token={}", self.token));
            }
            Csrf::WrongField => body.push_str(&format!("&csrf_token={wrong}")),
            Csrf::MissingField => {}
        }
        let mut request = self
            .client
            .post(&self.url)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        if let Some(cookie) = &self.cookie
            && csrf != Csrf::MissingCookie
        {
            request = request.header("cookie", cookie);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send().await.unwrap()
    }
}

/// Every state-changing page form, each with what makes it succeed, in an
/// order in which each succeeds after the ones before it.
async fn every_form(app: &TestApp) -> (Organizer, Vec<FormPost>) {
    let org = app.organizer("csrf@example.org").await;
    let spec = [TicketSpec::new(10, 4, 8)];
    let on_sale = owned_event(&org, opened(), "published", &spec).await;
    let draft = owned_event(&org, opened(), "draft", &spec).await;
    let to_unpublish = owned_event(&org, opened(), "published", &spec).await;
    let to_cancel = owned_event(&org, opened(), "published", &spec).await;
    api_buy(app, to_cancel.ticket_type_id(), 2, "fan@example.org").await;
    let order = api_buy(app, on_sale.ticket_type_id(), 1, "ada@example.org").await;
    let token = token_id(&app.pool, org.id, "tests").await;

    let anonymous = |what, path: String, fields: &[(&str, &str)], success| FormPost {
        what,
        client: app.client.clone(),
        url: app.url(&path),
        fields: owned_fields(fields),
        cookie: Some(csrf_cookie()),
        token: CSRF_TOKEN.to_owned(),
        success,
    };
    let organizer = |what, path: String, fields: Vec<(String, String)>, success| FormPost {
        what,
        client: org.client.clone(),
        url: org.url(&path),
        fields,
        cookie: None,
        token: org.csrf.clone(),
        success,
    };
    let tt = on_sale.ticket_type_id().to_string();
    let forms = vec![
        anonymous(
            "buy",
            format!("/events/{}/orders", on_sale.event_id),
            &[
                ("ticket_type_id", &tt),
                ("quantity", "2"),
                ("email", "buyer@example.org"),
                ("idempotency_key", "csrf-buy-1"),
            ],
            StatusCode::SEE_OTHER,
        ),
        anonymous(
            "cancel order",
            format!("/orders/{order}/cancel"),
            &[],
            StatusCode::SEE_OTHER,
        ),
        anonymous(
            "sign up",
            "/signup".to_owned(),
            &[("email", "new@example.org"), ("password", PASSWORD)],
            StatusCode::SEE_OTHER,
        ),
        anonymous(
            "log in",
            "/login".to_owned(),
            &[
                ("email", "csrf@example.org"),
                ("password", PASSWORD),
                ("next", "/organizer"),
            ],
            StatusCode::SEE_OTHER,
        ),
        organizer(
            "create event",
            "/organizer/events".to_owned(),
            new_event_fields("Forged"),
            StatusCode::SEE_OTHER,
        ),
        organizer(
            "edit event",
            format!("/organizer/events/{}/edit", on_sale.event_id),
            edit_fields(on_sale.ticket_type_id(), "Forged title", "10"),
            StatusCode::SEE_OTHER,
        ),
        organizer(
            "publish",
            format!("/organizer/events/{}/publish", draft.event_id),
            vec![],
            StatusCode::SEE_OTHER,
        ),
        organizer(
            "unpublish",
            format!("/organizer/events/{}/unpublish", to_unpublish.event_id),
            vec![],
            StatusCode::SEE_OTHER,
        ),
        organizer(
            "cancel event",
            format!("/organizer/events/{}/cancel", to_cancel.event_id),
            vec![],
            StatusCode::SEE_OTHER,
        ),
        organizer(
            "create token",
            "/organizer/settings/tokens".to_owned(),
            owned_fields(&[("name", "forged")]),
            StatusCode::OK,
        ),
        organizer(
            "revoke token",
            format!("/organizer/settings/tokens/{token}/revoke"),
            vec![],
            StatusCode::SEE_OTHER,
        ),
        organizer(
            "log out",
            "/logout".to_owned(),
            vec![],
            StatusCode::SEE_OTHER,
        ),
    ];
    (org, forms)
}

/// The form, sent as a real same-origin browser would, succeeds and writes:
/// so the refusals before it were about the token, and the snapshot sees
/// what this form writes.
async fn assert_form_works(app: &TestApp, post: &FormPost, before: &[(&str, i64, String)]) {
    let origin = app.url("");
    let resp = post
        .send(
            Csrf::Valid,
            &[("sec-fetch-site", "same-origin"), ("origin", &origin)],
        )
        .await;
    assert_eq!(
        resp.status(),
        post.success,
        "{} with a valid token",
        post.what
    );
    assert_ne!(
        snapshot(&app.pool).await,
        before,
        "{} with a valid token wrote nothing",
        post.what
    );
}

#[sqlx::test]
async fn every_state_changing_form_without_a_valid_csrf_token_is_403_and_writes_nothing(
    pool: PgPool,
) {
    let app = TestApp::spawn(pool.clone()).await;
    let (_org, forms) = every_form(&app).await;
    for post in &forms {
        let before = snapshot(&pool).await;
        let mut variants = vec![Csrf::MissingField, Csrf::WrongField];
        if post.cookie.is_some() {
            variants.push(Csrf::MissingCookie);
        }
        for csrf in variants {
            let resp = post.send(csrf, &[]).await;
            assert_eq!(
                resp.status(),
                StatusCode::FORBIDDEN,
                "{} with {csrf:?}",
                post.what
            );
            let body = resp.text().await.unwrap();
            assert!(
                body.contains("did not come from Stampede"),
                "{} with {csrf:?}: {body}",
                post.what
            );
        }
        assert_eq!(
            snapshot(&pool).await,
            before,
            "{} without a valid token wrote",
            post.what
        );
        assert_form_works(&app, post, &before).await;
    }
}

#[sqlx::test]
async fn every_state_changing_form_posted_cross_site_is_403_even_with_a_valid_token(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (_org, forms) = every_form(&app).await;
    for post in &forms {
        let before = snapshot(&pool).await;
        for headers in [
            &[("sec-fetch-site", "cross-site")][..],
            &[("sec-fetch-site", "same-site")][..],
            &[("origin", "https://evil.example")][..],
            &[("origin", "null")][..],
        ] {
            let resp = post.send(Csrf::Valid, headers).await;
            assert_eq!(
                resp.status(),
                StatusCode::FORBIDDEN,
                "{} with {headers:?}",
                post.what
            );
        }
        assert_eq!(
            snapshot(&pool).await,
            before,
            "{} posted cross-site wrote",
            post.what
        );
        assert_form_works(&app, post, &before).await;
    }
}

// ---------------------------------------------------------------------------
// Sign-up, log-in, sessions, log-out
// ---------------------------------------------------------------------------

#[sqlx::test]
async fn sign_up_refuses_a_bad_email_a_short_password_or_a_taken_email_with_422_and_the_form_refilled(
    pool: PgPool,
) {
    let app = TestApp::spawn(pool.clone()).await;
    app.organizer("taken@example.org").await;
    let organizers = count(&pool, "SELECT count(*) FROM organizers").await;

    let cases = [
        (
            "not-an-email",
            "long enough password",
            "&quot;not-an-email&quot; is not a valid email address.",
        ),
        (
            "short@example.org",
            "pw-2short",
            "Use at least 10 characters for your password.",
        ),
        (
            "Taken@Example.org",
            "another long password",
            "An organizer with this email already exists; log in instead.",
        ),
    ];
    for (email, password, message) in cases {
        let resp = app
            .post_form("/signup", &[("email", email), ("password", password)])
            .await;
        assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY, "{email}");
        assert!(
            set_cookie(&resp, "stampede_session").is_none(),
            "{email}: a refused sign-up started a session"
        );
        let body = resp.text().await.unwrap();
        assert!(body.contains(message), "{email}: {body}");
        assert!(body.contains("role=\"alert\""), "{email}: {body}");
        assert!(
            body.contains(&format!("value=\"{email}\"")),
            "{email}: the email is not refilled: {body}"
        );
        assert!(
            !body.contains(password),
            "{email}: the password came back: {body}"
        );
        assert!(body.contains("action=\"/signup\""), "{email}: {body}");
    }
    assert_eq!(
        count(&pool, "SELECT count(*) FROM organizers").await,
        organizers
    );
}

#[sqlx::test]
async fn log_in_with_a_wrong_password_or_an_unknown_email_is_401_with_the_message(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    app.organizer("ada@example.org").await;
    for (email, password) in [
        ("ada@example.org", "wrong password!"),
        ("nobody@example.org", PASSWORD),
        ("not an email", PASSWORD),
        ("ada@example.org", ""),
    ] {
        let resp = log_in(&app, email, password, "/organizer").await;
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "{email}");
        assert!(
            set_cookie(&resp, "stampede_session").is_none(),
            "{email}: a failed log-in started a session"
        );
        let body = resp.text().await.unwrap();
        assert!(
            body.contains("That email and password do not match an organizer account."),
            "{email}: {body}"
        );
        assert!(
            body.contains(&format!("value=\"{email}\"")),
            "{email}: {body}"
        );
        if !password.is_empty() {
            assert!(!body.contains(password), "{email}: {body}");
        }
    }
    assert_eq!(count(&pool, "SELECT count(*) FROM sessions").await, 1);
}

#[sqlx::test]
async fn log_in_follows_next_only_inside_the_organizer_area(pool: PgPool) {
    let cases = [
        ("/organizer/settings", "/organizer/settings"),
        ("/organizer/events/new", "/organizer/events/new"),
        (
            "/organizer/events/0b7f3a52-9c1e-4d4a-8f7e-2a6c5d9e1b30/edit",
            "/organizer/events/0b7f3a52-9c1e-4d4a-8f7e-2a6c5d9e1b30/edit",
        ),
        // Where a logged-out click on "Download orders" is sent back to.
        (
            "/organizer/events/0b7f3a52-9c1e-4d4a-8f7e-2a6c5d9e1b30/orders.csv",
            "/organizer/events/0b7f3a52-9c1e-4d4a-8f7e-2a6c5d9e1b30/orders.csv",
        ),
        ("/organizer", "/organizer"),
        ("", "/organizer"),
        ("/", "/organizer"),
        ("https://evil.example/organizer", "/organizer"),
        ("//evil.example", "/organizer"),
        ("//evil.example/organizer/", "/organizer"),
        ("/organizer//evil.example", "/organizer"),
        ("/\\evil.example", "/organizer"),
        ("/organizer\\..\\..\\evil", "/organizer"),
        ("/organizerx", "/organizer"),
        ("/events/x", "/organizer"),
        ("javascript:alert(1)", "/organizer"),
    ];
    let app = TestApp::spawn(pool.clone()).await;
    app.organizer("ada@example.org").await;

    for (next, expected) in cases {
        // The form carries only a safe `next`.
        let resp = app
            .client
            .get(app.url(&format!("/login?next={}", encode(next))))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "{next}");
        let body = resp.text().await.unwrap();
        assert!(
            body.contains(&format!("name=\"next\" value=\"{expected}\"")),
            "GET /login?next={next}: {body}"
        );
    }
    // Log-ins are limited per client (a burst of 10 per app): a fresh app
    // for every few attempts.
    for chunk in cases.chunks(7) {
        let app = TestApp::spawn(pool.clone()).await;
        for (next, expected) in chunk {
            let resp = log_in(&app, "ada@example.org", PASSWORD, next).await;
            assert_eq!(resp.status(), StatusCode::SEE_OTHER, "{next}");
            assert_eq!(location(&resp), *expected, "next {next}");
        }
    }
}

#[sqlx::test]
async fn log_in_next_with_dot_segments_cannot_climb_out_of_the_organizer_area(pool: PgPool) {
    // A browser resolves `/organizer/../x` (also spelt `%2e%2e`) to `/x`.
    let app = TestApp::spawn(pool.clone()).await;
    app.organizer("ada@example.org").await;
    for next in ["/organizer/../logout", "/organizer/%2e%2e/events"] {
        let resp = log_in(&app, "ada@example.org", PASSWORD, next).await;
        assert_eq!(resp.status(), StatusCode::SEE_OTHER, "{next}");
        assert_eq!(
            location(&resp),
            "/organizer",
            "next {next} leaves /organizer"
        );
    }
}

#[sqlx::test]
async fn the_session_cookie_is_http_only_and_same_site_lax_and_gets_a_new_id_at_log_in(
    pool: PgPool,
) {
    let app = TestApp::spawn(pool.clone()).await;
    // Sign-up logs in too.
    let resp = app
        .post_form(
            "/signup",
            &[("email", "ada@example.org"), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), "/organizer");
    let signed_up = session_id(&resp);

    let resp = log_in(&app, "ada@example.org", PASSWORD, "/organizer").await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let header = set_cookie(&resp, "stampede_session").unwrap();
    let attributes: Vec<String> = header
        .split(';')
        .skip(1)
        .map(|a| a.trim().to_ascii_lowercase())
        .collect();
    assert!(
        attributes.iter().any(|a| a == "httponly"),
        "session cookie: {header}"
    );
    assert!(
        attributes.iter().any(|a| a == "samesite=lax"),
        "session cookie: {header}"
    );
    assert!(
        attributes.iter().any(|a| a == "path=/"),
        "session cookie: {header}"
    );
    let first = cookie_value(&header);
    assert_ne!(first, signed_up);

    // The CSRF cookie is HttpOnly and SameSite=Lax as well.
    let resp = app.client.get(app.url("/login")).send().await.unwrap();
    let csrf = set_cookie(&resp, "stampede_csrf").expect("a fresh CSRF cookie");
    assert!(csrf.contains("HttpOnly"), "{csrf}");
    assert!(csrf.contains("SameSite=Lax"), "{csrf}");

    // Logging in from a browser that already carries a session (planted or
    // not) gives a new id, and the old one stops working.
    let resp = post_with_cookies(
        &app,
        "/login",
        &[
            ("email", "ada@example.org"),
            ("password", PASSWORD),
            ("next", "/organizer"),
        ],
        &[("stampede_session", &first)],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let second = session_id(&resp);
    assert_ne!(second, first, "the session id did not change at log-in");

    let resp = get_with_session(&app, "/organizer", &first).await;
    assert_eq!(
        resp.status(),
        StatusCode::SEE_OTHER,
        "the old id still works"
    );
    assert_eq!(location(&resp), login_redirect("/organizer"));
    let resp = get_with_session(&app, "/organizer", &second).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(resp.text().await.unwrap().contains("ada@example.org"));
}

#[sqlx::test]
async fn log_out_ends_the_session(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("ada@example.org").await;
    let resp = log_in(&app, "ada@example.org", PASSWORD, "/organizer").await;
    let session = session_id(&resp);
    assert_eq!(
        get_with_session(&app, "/organizer", &session)
            .await
            .status(),
        StatusCode::OK
    );

    let resp = post_with_cookies(&app, "/logout", &[], &[("stampede_session", &session)]).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), "/");
    let stored = sqlx::query_scalar::<_, i64>("SELECT count(*) FROM sessions WHERE id = $1")
        .bind(&session)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 0, "the session is still stored");
    for path in ["/organizer", "/organizer/settings"] {
        let resp = get_with_session(&app, path, &session).await;
        assert_eq!(resp.status(), StatusCode::SEE_OTHER, "{path}");
        assert_eq!(location(&resp), login_redirect(path));
    }

    // The same through the cookie jar of a browser.
    let resp = org.post_form("/logout", &[]).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let resp = org.get("/organizer").await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), login_redirect("/organizer"));
}

#[sqlx::test]
async fn more_log_in_attempts_than_the_burst_from_one_client_get_429_with_retry_after(
    pool: PgPool,
) {
    let burst = stampede::web::Limits::default().login_burst as usize;
    let app = TestApp::spawn(pool.clone()).await;
    app.organizer("ada@example.org").await;

    // All at once, each claiming another address in headers that no proxy
    // set: the limit is on the peer address.
    let attempts = (0..burst * 2).map(|i| {
        let forwarded = format!("10.0.{}.{}", i / 200, i % 200 + 1);
        let request = app
            .client
            .post(app.url("/login"))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("cookie", csrf_cookie())
            .header("x-forwarded-for", forwarded.clone())
            .header("x-real-ip", forwarded)
            .body(common::form_body(&[
                ("email", "ada@example.org"),
                ("password", &format!("guess number {i}")),
            ]));
        async move { request.send().await.unwrap() }
    });
    let responses = futures::future::join_all(attempts).await;

    let mut refused = 0;
    let mut limited = 0;
    for resp in responses {
        match resp.status() {
            StatusCode::UNAUTHORIZED => refused += 1,
            StatusCode::TOO_MANY_REQUESTS => {
                limited += 1;
                let retry_after = resp
                    .headers()
                    .get("retry-after")
                    .expect("429 without Retry-After")
                    .to_str()
                    .unwrap()
                    .parse::<u64>()
                    .expect("Retry-After in seconds");
                assert!(retry_after > 0);
                let body = resp.text().await.unwrap();
                assert!(body.contains("Too many attempts"), "{body}");
            }
            other => panic!("unexpected {other}"),
        }
    }
    assert!(
        refused >= burst,
        "only {refused} attempts were checked before the limit"
    );
    assert!(
        limited >= 1,
        "{} attempts at once were never limited",
        burst * 2
    );
    // Only log-in attempts are limited.
    let resp = app.client.get(app.url("/login")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(count(&pool, "SELECT count(*) FROM sessions").await, 1);
}

// ---------------------------------------------------------------------------
// API tokens
// ---------------------------------------------------------------------------

#[sqlx::test]
async fn an_api_token_from_the_settings_page_is_shown_once_works_as_bearer_and_stops_when_revoked(
    pool: PgPool,
) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("tokens@example.org").await;

    let resp = org
        .post_form("/organizer/settings/tokens", &[("name", "Box office")])
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let page = resp.text().await.unwrap();
    assert!(page.contains("it will not be shown again"), "{page}");
    let token = token_on_page(&page);
    assert!(token.starts_with("stp_"), "{token}");
    assert_eq!(token.len(), 47, "{token}");

    // It works as a bearer token, for this organizer.
    let resp = list_own_events(&app, &token).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let owner = create_event_with_token(&app, &token, "By token").await;
    assert_eq!(owner, Some(org.id));

    // Afterwards the settings page lists it by its prefix only.
    let id = token_id(&pool, org.id, "Box office").await;
    let settings = org.get("/organizer/settings").await.text().await.unwrap();
    assert!(settings.contains("Box office"), "{settings}");
    assert!(
        settings.contains(&format!("<code>{}…</code>", &token[..10])),
        "{settings}"
    );
    assert!(!settings.contains(&token), "the token is shown again");
    assert!(
        !settings.contains(&token[10..]),
        "the token's secret part is shown again"
    );
    assert!(
        settings.contains(&format!(
            "action=\"/organizer/settings/tokens/{id}/revoke\""
        )),
        "{settings}"
    );

    // Revoked: refused, marked, and a second revoke finds nothing to revoke.
    let resp = org
        .post_form(&format!("/organizer/settings/tokens/{id}/revoke"), &[])
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), "/organizer/settings");
    assert_unauthorized_json(list_own_events(&app, &token).await, "revoked token").await;
    let settings = org.get("/organizer/settings").await.text().await.unwrap();
    assert!(settings.contains("revoked"), "{settings}");
    assert!(
        !settings.contains(&format!(
            "action=\"/organizer/settings/tokens/{id}/revoke\""
        )),
        "{settings}"
    );
    let resp = org
        .post_form(&format!("/organizer/settings/tokens/{id}/revoke"), &[])
        .await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    // The organizer's other token is untouched.
    assert_eq!(
        list_own_events(&app, &org.api_token).await.status(),
        StatusCode::OK
    );

    // An unnamed token is refused with the form.
    let tokens = count(&pool, "SELECT count(*) FROM api_tokens").await;
    let resp = org
        .post_form("/organizer/settings/tokens", &[("name", "   ")])
        .await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        resp.text()
            .await
            .unwrap()
            .contains("Give the token a name of 1 to 100 characters.")
    );
    assert_eq!(
        count(&pool, "SELECT count(*) FROM api_tokens").await,
        tokens
    );
}

#[sqlx::test]
async fn api_tokens_are_stored_as_hashes_and_their_text_is_nowhere_in_the_database(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("hash@example.org").await;
    let from_page = create_token_on_page(&org, "Box office").await;
    // Use them, so that nothing written on use stores them either.
    for token in [&from_page, &org.api_token] {
        assert_eq!(list_own_events(&app, token).await.status(), StatusCode::OK);
    }

    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables
         WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(tables.iter().any(|t| t == "api_tokens"), "{tables:?}");
    for token in [&from_page, &org.api_token] {
        let stored: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM api_tokens
             WHERE token_hash = sha256(convert_to($1, 'UTF8')) AND prefix = left($1, 10)",
        )
        .bind(token)
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(stored, 1, "no row holds the SHA-256 of {token}");
        for needle in [token.as_str(), &token[10..]] {
            for table in &tables {
                let hits: i64 = sqlx::query_scalar(&format!(
                    "SELECT count(*) FROM \"{table}\" x WHERE strpos(x::text, $1) > 0"
                ))
                .bind(needle)
                .fetch_one(&pool)
                .await
                .unwrap();
                assert_eq!(hits, 0, "{table} holds the token text");
            }
            // Binary columns, as bytes rather than hex.
            for (table, column) in [("api_tokens", "token_hash"), ("sessions", "data")] {
                let hits: i64 = sqlx::query_scalar(&format!(
                    "SELECT count(*) FROM {table} WHERE position(convert_to($1, 'UTF8') IN {column}) > 0"
                ))
                .bind(needle)
                .fetch_one(&pool)
                .await
                .unwrap();
                assert_eq!(hits, 0, "{table}.{column} holds the token text");
            }
        }
    }
}

// ---------------------------------------------------------------------------
// `stampede organizer add`
// ---------------------------------------------------------------------------

/// Run the real binary with `stdin` as its standard input.
async fn stampede_cli(database_url: &str, args: &[&str], stdin: &str) -> std::process::Output {
    use tokio::io::AsyncWriteExt as _;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_stampede"))
        .arg("--database-url")
        .arg(database_url)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the stampede binary starts");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).await.unwrap();
    drop(input);
    child.wait_with_output().await.unwrap()
}

#[sqlx::test]
async fn organizer_add_prints_a_token_that_works_and_the_password_logs_in(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = common::pool(connect.clone(), 8).await;
    let url = database_url(&connect);
    let password = "a password typed into a pipe";
    let out = stampede_cli(
        &url,
        &["organizer", "add", "Cli@Example.org", "--password-stdin"],
        &format!("{password}\n"),
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    let stdout = String::from_utf8(out.stdout).unwrap();
    // Only the token goes to stdout, so that scripts can capture it.
    assert_eq!(stdout.lines().count(), 1, "stdout: {stdout:?}");
    let token = stdout.trim().to_owned();
    assert!(token.starts_with("stp_") && token.len() == 47, "{token:?}");

    let (id, email): (Uuid, String) =
        sqlx::query_as("SELECT id, email FROM organizers WHERE email = 'cli@example.org'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(email, "cli@example.org");
    // The token is stored under the default name.
    token_id(&pool, id, "command line").await;

    let app = TestApp::spawn(pool.clone()).await;
    let resp = list_own_events(&app, &token).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let owner = create_event_with_token(&app, &token, "Scripted").await;
    assert_eq!(owner, Some(id));

    // The password (without its newline) logs in through the page.
    let resp = log_in(&app, "cli@example.org", password, "/organizer").await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), "/organizer");
    let session = session_id(&resp);
    let resp = get_with_session(&app, "/organizer", &session).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let body = resp.text().await.unwrap();
    assert!(body.contains("cli@example.org"), "{body}");
    assert!(body.contains("Scripted"), "{body}");
    pool.close().await;
}

#[sqlx::test]
async fn organizer_add_refuses_a_short_password_or_a_taken_email_and_writes_nothing(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = common::pool(connect.clone(), 8).await;
    let url = database_url(&connect);
    let out = stampede_cli(
        &url,
        &["organizer", "add", "first@example.org", "--password-stdin"],
        "a long enough password\n",
    )
    .await;
    assert!(out.status.success());
    let before = snapshot(&pool).await;

    for (email, password) in [
        ("short@example.org", "short\n"),
        ("FIRST@example.org", "another long password\n"),
        ("not-an-email", "a long enough password\n"),
    ] {
        let out = stampede_cli(
            &url,
            &["organizer", "add", email, "--password-stdin"],
            password,
        )
        .await;
        assert!(!out.status.success(), "{email}: succeeded");
        assert!(out.stdout.is_empty(), "{email}: printed a token");
        assert!(!out.stderr.is_empty(), "{email}: no reason given");
    }
    assert_eq!(snapshot(&pool).await, before);
    pool.close().await;
}

// ---------------------------------------------------------------------------
// Cancelling an event
// ---------------------------------------------------------------------------

#[sqlx::test]
async fn cancelling_an_event_cancels_every_order_returns_the_tickets_and_stops_sales(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("owner@example.org").await;
    let event = owned_event(
        &org,
        opened(),
        "published",
        &[TicketSpec::new(10, 4, 4), TicketSpec::new(5, 2, 2)],
    )
    .await;
    let other = owned_event(&org, opened(), "published", &[TicketSpec::new(10, 4, 4)]).await;
    let [standing, seated] = event.ticket_type_ids[..] else {
        panic!("two ticket types")
    };
    let a = api_buy(&app, standing, 3, "ada@example.org").await;
    api_buy(&app, standing, 1, "ada@example.org").await;
    api_buy(&app, seated, 2, "bob@example.org").await;
    let cancelled_before = api_buy(&app, seated, 1, "cy@example.org").await;
    let resp = app
        .post_form(&format!("/orders/{cancelled_before}/cancel"), &[])
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let earlier_cancel: Option<OffsetDateTime> =
        sqlx::query_scalar("SELECT cancelled_at FROM orders WHERE id = $1")
            .bind(cancelled_before)
            .fetch_one(&pool)
            .await
            .unwrap();
    let untouched = api_buy(&app, other.ticket_type_id(), 2, "ada@example.org").await;
    assert_eq!(
        stock(&pool, event.event_id).await,
        vec![(standing, 10, 6, false), (seated, 5, 3, false)]
    );

    let page = format!("/organizer/events/{}", event.event_id);
    let resp = org.post_form(&format!("{page}/cancel"), &[]).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), page);

    assert_eq!(event_status(&pool, event.event_id).await, "cancelled");
    assert_eq!(
        stock(&pool, event.event_id).await,
        vec![(standing, 10, 10, true), (seated, 5, 5, true)]
    );
    let orders: Vec<(Uuid, String, bool)> = sqlx::query_as(
        "SELECT o.id, o.status, o.cancelled_at IS NOT NULL FROM orders o
         JOIN ticket_types t ON t.id = o.ticket_type_id WHERE t.event_id = $1",
    )
    .bind(event.event_id)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(orders.len(), 4);
    for (id, status, stamped) in &orders {
        assert_eq!(
            (status.as_str(), *stamped),
            ("cancelled", true),
            "order {id}"
        );
    }
    let still: Option<OffsetDateTime> =
        sqlx::query_scalar("SELECT cancelled_at FROM orders WHERE id = $1")
            .bind(cancelled_before)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(
        still, earlier_cancel,
        "an already cancelled order was cancelled again"
    );
    let held: i64 = sqlx::query_scalar(
        "SELECT COALESCE(SUM(h.quantity), 0)::int8 FROM buyer_holdings h
         JOIN ticket_types t ON t.id = h.ticket_type_id WHERE t.event_id = $1",
    )
    .bind(event.event_id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(held, 0);
    // Another event of the same organizer keeps its order.
    let status: String = sqlx::query_scalar("SELECT status FROM orders WHERE id = $1")
        .bind(untouched)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(status, "confirmed");
    assert_invariants(&pool).await;

    // No more sales, through the API or the form.
    let resp = app
        .client
        .post(app.url("/api/v1/orders"))
        .json(&json!({
            "ticket_type_id": standing, "quantity": 1,
            "email": "late@example.org", "idempotency_key": "late-1",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "sale_closed", "{body}");
    let tt = seated.to_string();
    let resp = app
        .post_form(
            &format!("/events/{}/orders", event.event_id),
            &[
                ("ticket_type_id", &tt),
                ("quantity", "1"),
                ("email", "late@example.org"),
                ("idempotency_key", "late-2"),
            ],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    assert!(
        resp.text()
            .await
            .unwrap()
            .contains("This event was cancelled.")
    );
    // Buyers see the cancellation, not a buy form; the event is not listed.
    let public = app
        .client
        .get(app.url(&format!("/events/{}", event.event_id)))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(public.contains("This event was cancelled."), "{public}");
    assert!(!public.contains("idempotency_key"), "{public}");
    let listed: Value = app
        .client
        .get(app.url("/api/v1/events"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        !listed.to_string().contains(&event.event_id.to_string()),
        "{listed}"
    );
    let order_page = app
        .client
        .get(app.url(&format!("/orders/{a}")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(order_page.contains("Order cancelled"), "{order_page}");

    // Nothing brings it back or returns tickets twice: a second cancel, a
    // buyer's own cancel, publishing it again.
    let after = snapshot(&pool).await;
    let resp = org.post_form(&format!("{page}/cancel"), &[]).await;
    assert!(
        !resp.status().is_server_error(),
        "second cancel: {}",
        resp.status()
    );
    let resp = app.post_form(&format!("/orders/{a}/cancel"), &[]).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let resp = org.post_form(&format!("{page}/publish"), &[]).await;
    assert!(
        resp.status().is_client_error(),
        "publishing a cancelled event: {}",
        resp.status()
    );
    assert_eq!(snapshot(&pool).await, after);
    assert_eq!(org.get(&page).await.status(), StatusCode::OK);
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn two_hundred_buyers_racing_the_owner_cancelling_the_event_leave_no_confirmed_order(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = common::pool(connect, 48).await;
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("owner@example.org").await;
    let event = owned_event(
        &org,
        opened(),
        "published",
        &[TicketSpec::new(120, 2, 2), TicketSpec::new(40, 2, 2)],
    )
    .await;
    let buyers = 200;
    // The owner cancels once this many purchases have gone through, so that
    // there are orders to cancel and purchases still in flight.
    let cancel_after = 20;

    let barrier = Arc::new(Barrier::new(buyers));
    let sold = Arc::new(AtomicUsize::new(0));
    let enough_sold = Arc::new(Notify::new());
    let now = common::now();
    let tasks: Vec<_> = (0..buyers)
        .map(|i| {
            let request = PurchaseRequest {
                event_id: Some(event.event_id.into()),
                ticket_type_id: event.ticket_type_ids[i % 2].into(),
                quantity: Quantity::new(1 + (i as i64 / 2) % 2).unwrap(),
                email: Email::parse(&format!("buyer{i}@example.org")).unwrap(),
                idempotency_key: IdempotencyKey::parse(&format!("race-{i}")).unwrap(),
            };
            let (pool, barrier, sold, enough_sold) = (
                pool.clone(),
                barrier.clone(),
                sold.clone(),
                enough_sold.clone(),
            );
            tokio::spawn(async move {
                barrier.wait().await;
                let result = sale::purchase(&pool, now, &request).await;
                if matches!(result, Ok(Purchase::Created(_)))
                    && sold.fetch_add(1, Ordering::SeqCst) + 1 == cancel_after
                {
                    enough_sold.notify_one();
                }
                result
            })
        })
        .collect();
    let page = format!("/organizer/events/{}", event.event_id);
    let cancel = {
        let enough_sold = enough_sold.clone();
        let (client, url) = (org.client.clone(), org.url(&format!("{page}/cancel")));
        let body = format!("csrf_token={}", org.csrf);
        tokio::spawn(async move {
            enough_sold.notified().await;
            client
                .post(url)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body)
                .send()
                .await
                .unwrap()
        })
    };

    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap());
    }
    // Never leave the owner waiting, even if too few purchases went through.
    enough_sold.notify_one();
    let mut created = 0;
    let mut refusals = std::collections::BTreeMap::<&str, usize>::new();
    for result in results {
        match result {
            Ok(Purchase::Created(_)) => created += 1,
            Ok(Purchase::Replayed(order)) => panic!("a fresh key was replayed: {order:?}"),
            Err(
                err
                @ (AppError::SoldOut | AppError::NotEnoughLeft { .. } | AppError::SaleClosed(_)),
            ) => *refusals.entry(err.code()).or_default() += 1,
            Err(err) => panic!("a buyer got {} ({err:?})", err.code()),
        }
    }
    let resp = cancel.await.unwrap();
    eprintln!("sold {created} before or while the owner cancelled; refused {refusals:?}");
    assert_eq!(resp.status(), StatusCode::SEE_OTHER, "the owner's cancel");
    assert_eq!(location(&resp), page);
    assert!(created >= cancel_after, "only {created} sold");

    assert_eq!(event_status(&pool, event.event_id).await, "cancelled");
    let confirmed = count(
        &pool,
        "SELECT count(*) FROM orders WHERE status = 'confirmed'",
    )
    .await;
    assert_eq!(
        confirmed, 0,
        "{confirmed} orders outlived the cancel ({created} sold, refusals {refusals:?})"
    );
    let cancelled = count(
        &pool,
        "SELECT count(*) FROM orders WHERE status = 'cancelled'",
    )
    .await;
    assert_eq!(cancelled, created as i64, "every sold order is cancelled");
    for (id, capacity, remaining, halted) in stock(&pool, event.event_id).await {
        assert_eq!(remaining, capacity, "ticket type {id}");
        assert!(halted, "ticket type {id} still on sale");
    }
    let holdings: i64 = count(
        &pool,
        "SELECT count(*) FROM buyer_holdings WHERE quantity <> 0",
    )
    .await;
    assert_eq!(holdings, 0, "buyer holdings left after the cancel");
    assert_invariants(&pool).await;
    // Let sqlx::test drop the database: no connection may stay open.
    pool.close().await;
}

// ---------------------------------------------------------------------------
// Tickets on the order page
// ---------------------------------------------------------------------------

/// The tickets an order page shows: (code, QR image data URI), in order.
/// The page may print a code in groups for reading aloud ("ABCD EFGH …");
/// the code is what remains without the spaces.
fn tickets_on_page(html: &str) -> Vec<(String, String)> {
    html.split("<li class=\"ticket\">")
        .skip(1)
        .map(|item| {
            let item = &item[..item.find("</li>").expect("a closed ticket item")];
            let src_marker = "src=\"";
            let src_start = item.find(src_marker).expect("a QR <img>") + src_marker.len();
            let src = &item[src_start..src_start + item[src_start..].find('"').unwrap()];
            assert!(item.starts_with("<img "), "{item}");
            let code_marker = "<code class=\"ticket-code\">";
            let code_start = item.find(code_marker).expect("a ticket code") + code_marker.len();
            let shown = &item[code_start..code_start + item[code_start..].find('<').unwrap()];
            let code: String = shown.split_whitespace().collect();
            (code, src.to_owned())
        })
        .collect()
}

async fn order_page(app: &TestApp, order_id: Uuid) -> String {
    let resp = app
        .client
        .get(app.url(&format!("/orders/{order_id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    resp.text().await.unwrap()
}

#[sqlx::test]
async fn the_order_page_shows_one_ticket_per_seat_with_a_distinct_code_and_a_qr_image(
    pool: PgPool,
) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let app = TestApp::spawn(pool.clone()).await;
    let order = api_buy(&app, fixture.ticket_type_id(), 3, "ada@example.org").await;

    let page = order_page(&app, order).await;
    let tickets = tickets_on_page(&page);
    assert_eq!(tickets.len(), 3, "{page}");
    for n in 1..=3 {
        assert!(page.contains(&format!("Ticket {n} of 3")), "{page}");
    }
    let codes: Vec<String> = tickets.iter().map(|(code, _)| code.clone()).collect();
    for code in &codes {
        assert_eq!(code.len(), 32, "{code}");
        assert!(
            code.bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_uppercase()),
            "{code}"
        );
    }
    assert_eq!(
        codes.iter().collect::<BTreeSet<_>>().len(),
        3,
        "codes repeat: {codes:?}"
    );
    assert_eq!(codes, ticket_codes(&pool, order).await);

    let mut images = BTreeSet::new();
    for (code, src) in &tickets {
        let data = src
            .strip_prefix("data:image/svg+xml;base64,")
            .unwrap_or_else(|| panic!("ticket {code}: image {src}"));
        let svg = base64::engine::general_purpose::STANDARD
            .decode(data)
            .expect("base64 image");
        let svg = String::from_utf8(svg).expect("an SVG is text");
        assert!(svg.contains("<svg"), "ticket {code}: {svg}");
        images.insert(svg);
    }
    assert_eq!(images.len(), 3, "two tickets share a QR code");

    // A cancelled order shows no codes to scan.
    let resp = app.post_form(&format!("/orders/{order}/cancel"), &[]).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let page = order_page(&app, order).await;
    assert!(tickets_on_page(&page).is_empty(), "{page}");
    assert!(!page.contains("ticket-code"), "{page}");
    assert!(!page.contains("data:image/svg+xml"), "{page}");
    for code in &codes {
        let grouped: Vec<&str> = (0..code.len())
            .step_by(4)
            .map(|i| &code[i..i + 4])
            .collect();
        assert!(!page.contains(code.as_str()), "{page}");
        assert!(!page.contains(&grouped.join(" ")), "{page}");
    }
}

#[sqlx::test]
async fn ticket_codes_are_unique_across_orders(pool: PgPool) {
    let fixture = published_event(
        &pool,
        &[TicketSpec::new(50, 4, 4), TicketSpec::new(50, 4, 4)],
    )
    .await;
    let app = TestApp::spawn(pool.clone()).await;
    let mut all = Vec::new();
    for i in 0..8 {
        let tt = fixture.ticket_type_ids[i % 2];
        let order = api_buy(&app, tt, 1 + (i as i64 % 4), &format!("b{i}@example.org")).await;
        let shown: Vec<String> = tickets_on_page(&order_page(&app, order).await)
            .into_iter()
            .map(|(code, _)| code)
            .collect();
        assert_eq!(shown.len(), 1 + i % 4);
        assert_eq!(shown, ticket_codes(&pool, order).await);
        all.extend(shown);
    }
    let distinct: BTreeSet<&String> = all.iter().collect();
    assert_eq!(distinct.len(), all.len(), "a code repeats: {all:?}");
    let (rows, codes): (i64, i64) =
        sqlx::query_as("SELECT count(*), count(DISTINCT code) FROM tickets")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((rows, codes), (all.len() as i64, all.len() as i64));

    // The schema refuses a second ticket with a code already in use.
    let order: Uuid = sqlx::query_scalar("SELECT id FROM orders LIMIT 1")
        .fetch_one(&pool)
        .await
        .unwrap();
    let err = sqlx::query("INSERT INTO tickets (order_id, position, code) VALUES ($1, 99, $2)")
        .bind(order)
        .bind(&all[0])
        .execute(&pool)
        .await
        .expect_err("a duplicate ticket code was stored");
    assert_eq!(
        err.as_database_error().and_then(|e| e.constraint()),
        Some("tickets_code_unique")
    );
}
