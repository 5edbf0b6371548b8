mod common;

// Every page and API route over real HTTP: the real router on a loopback
// port, a client that does not follow redirects, and the tables checked
// directly after each request.

use common::{
    TestApp, TicketSpec, api_buy, assert_invariants, capacity_and_remaining, event_status,
    event_with_window, form_time, location, order_count, order_status,
    organizer::{api_create_event, opened, owned_event, owned_published_event},
    published_event, remaining,
};
use reqwest::{Method, Response, StatusCode};
use serde_json::{Value, json};
use sqlx::PgPool;
use time::{Duration as Span, OffsetDateTime, macros::format_description};
use uuid::Uuid;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

async fn get(app: &TestApp, path: &str) -> Response {
    app.client.get(app.url(path)).send().await.unwrap()
}

/// A page form post as the browser sends it: the CSRF cookie and the
/// matching hidden field ride along (see `stampede::web::csrf`).
async fn post_form(app: &TestApp, path: &str, fields: &[(&str, &str)]) -> Response {
    app.post_form(path, fields).await
}

/// A page form post with a hand-written body (plus the CSRF cookie and field).
async fn post_raw_form(app: &TestApp, path: &str, body: String) -> Response {
    app.client
        .post(app.url(path))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("cookie", common::csrf_cookie())
        .body(format!("{body}{}", common::form_body(&[])))
        .send()
        .await
        .unwrap()
}

async fn post_json(app: &TestApp, path: &str, body: &Value) -> Response {
    app.client
        .post(app.url(path))
        .json(body)
        .send()
        .await
        .unwrap()
}

/// A bodiless POST, as an API client sends it.
async fn post_empty(app: &TestApp, path: &str) -> Response {
    app.client.post(app.url(path)).send().await.unwrap()
}

/// A button-only page form (cancel, publish, ...): just the CSRF field.
async fn post_button(app: &TestApp, path: &str) -> Response {
    post_form(app, path, &[]).await
}

/// The order id out of a `303 See Other` to `/orders/{id}`.
fn order_id_from_redirect(resp: &Response) -> Uuid {
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let location = location(resp);
    let id = location
        .strip_prefix("/orders/")
        .unwrap_or_else(|| panic!("redirect to {location}, not to an order"));
    Uuid::parse_str(id).unwrap()
}

/// The value of the hidden idempotency key input in a rendered buy form.
fn idempotency_key_in(body: &str) -> String {
    let marker = "name=\"idempotency_key\" value=\"";
    let start = body.find(marker).expect("a hidden idempotency_key input") + marker.len();
    let len = body[start..].find('"').unwrap();
    body[start..start + len].to_owned()
}

async fn assert_api_error(
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

async fn event_count(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM events")
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn ticket_type_count(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM ticket_types")
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn event_title(pool: &PgPool, event_id: Uuid) -> String {
    sqlx::query_scalar("SELECT title FROM events WHERE id = $1")
        .bind(event_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// "Mon 1 Mar 2027, 19:30 UTC", the way pages show times.
fn shown_time(t: OffsetDateTime) -> String {
    let format = format_description!(
        "[weekday repr:short] [day padding:none] [month repr:short] [year], [hour]:[minute] UTC"
    );
    t.format(format).unwrap()
}

/// A complete, valid organizer form for a new event with one ticket type.
fn new_event_form(title: &str) -> Vec<(&'static str, String)> {
    vec![
        ("title", title.to_owned()),
        ("venue", "Main hall".to_owned()),
        ("description", "An evening of tests.".to_owned()),
        ("starts_at", "2030-03-01T19:30".to_owned()),
        ("sale_opens_at", "2020-01-01T10:00".to_owned()),
        ("sale_closes_at", String::new()),
        ("status", "published".to_owned()),
        ("tt_name_0", "Standing".to_owned()),
        ("tt_price_0", "25.00".to_owned()),
        ("tt_currency_0", "EUR".to_owned()),
        ("tt_capacity_0", "120".to_owned()),
        ("tt_max_per_order_0", "4".to_owned()),
        ("tt_max_per_buyer_0", "6".to_owned()),
        // A blank row, as the form always carries some.
        ("tt_name_1", String::new()),
        ("tt_price_1", String::new()),
        ("tt_currency_1", "EUR".to_owned()),
        ("tt_capacity_1", String::new()),
        ("tt_max_per_order_1", String::new()),
        ("tt_max_per_buyer_1", String::new()),
    ]
}

fn with(fields: &[(&'static str, String)], name: &str, value: &str) -> Vec<(&'static str, String)> {
    let mut out = fields.to_vec();
    match out.iter_mut().find(|(key, _)| *key == name) {
        Some(field) => field.1 = value.to_owned(),
        None => panic!("no field {name} in the form"),
    }
    out
}

fn without(fields: &[(&'static str, String)], name: &str) -> Vec<(&'static str, String)> {
    fields
        .iter()
        .filter(|(key, _)| *key != name)
        .cloned()
        .collect()
}

fn borrowed<'a>(fields: &'a [(&'static str, String)]) -> Vec<(&'a str, &'a str)> {
    fields.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// The organizer's edit form for a fixture event, as the edit page fills it in.
fn edit_form(ticket_type_id: Uuid, title: &str, capacity: &str) -> Vec<(&'static str, String)> {
    let opens = opened();
    vec![
        ("title", title.to_owned()),
        ("venue", "Test hall".to_owned()),
        ("description", "A test event".to_owned()),
        ("starts_at", form_time(opens + Span::days(30))),
        ("sale_opens_at", form_time(opens)),
        ("sale_closes_at", String::new()),
        ("tt_id_0", ticket_type_id.to_string()),
        ("tt_name_0", "General admission 0".to_owned()),
        ("tt_price_0", "25.00".to_owned()),
        ("tt_currency_0", "EUR".to_owned()),
        ("tt_capacity_0", capacity.to_owned()),
        ("tt_max_per_order_0", "4".to_owned()),
        ("tt_max_per_buyer_0", "8".to_owned()),
    ]
}

// ---------------------------------------------------------------------------
// Buyer pages
// ---------------------------------------------------------------------------

#[sqlx::test]
async fn home_page_lists_published_events_but_not_drafts(pool: PgPool) {
    let published = published_event(&pool, &[TicketSpec::new(50, 4, 4)]).await;
    let opened = opened();
    let draft = event_with_window(&pool, opened, None, "draft", &[TicketSpec::new(50, 4, 4)]).await;
    let app = TestApp::spawn(pool.clone()).await;

    let resp = get(&app, "/").await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let body = resp.text().await.unwrap();
    assert!(
        body.contains(&format!("href=\"/events/{}\"", published.event_id)),
        "{body}"
    );
    assert!(body.contains("50 of 50 left"), "{body}");
    assert!(
        !body.contains(&draft.event_id.to_string()),
        "a draft is listed: {body}"
    );
}

#[sqlx::test]
async fn home_page_without_events_says_there_are_none(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let body = get(&app, "/").await.text().await.unwrap();
    assert!(body.contains("No events on sale yet"), "{body}");
}

#[sqlx::test]
async fn event_page_shows_ticket_types_remaining_and_a_buy_form_with_an_idempotency_key(
    pool: PgPool,
) {
    let fixture = published_event(
        &pool,
        &[TicketSpec::new(10, 4, 6), TicketSpec::new(3, 2, 2)],
    )
    .await;
    let app = TestApp::spawn(pool.clone()).await;
    api_buy(&app, fixture.ticket_type_ids[0], 3, "early@example.org").await;

    let resp = get(&app, &format!("/events/{}", fixture.event_id)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let body = resp.text().await.unwrap();
    assert!(body.contains("Test concert"), "{body}");
    assert!(body.contains("Test hall"), "{body}");
    assert!(body.contains("General admission 0"), "{body}");
    assert!(body.contains("General admission 1"), "{body}");
    assert!(body.contains("25.00 EUR"), "{body}");
    assert!(body.contains("7 of 10 left"), "{body}");
    assert!(body.contains("3 of 3 left"), "{body}");
    assert!(
        body.contains(&format!("action=\"/events/{}/orders\"", fixture.event_id)),
        "{body}"
    );
    for id in &fixture.ticket_type_ids {
        assert!(
            body.contains(&format!("name=\"ticket_type_id\" value=\"{id}\"")),
            "{body}"
        );
    }
    assert!(body.contains("name=\"quantity\""), "{body}");
    assert!(body.contains("name=\"email\""), "{body}");
    let key = idempotency_key_in(&body);
    assert!(
        body.contains("type=\"hidden\" name=\"idempotency_key\""),
        "{body}"
    );
    Uuid::parse_str(&key).expect("the key is a UUID");

    // Every render carries a fresh key, so two tabs are two purchases.
    let again = get(&app, &format!("/events/{}", fixture.event_id))
        .await
        .text()
        .await
        .unwrap();
    assert_ne!(idempotency_key_in(&again), key);
}

#[sqlx::test]
async fn event_page_of_a_draft_an_unknown_id_or_a_garbage_id_is_not_found(pool: PgPool) {
    let opened = opened();
    let draft = event_with_window(&pool, opened, None, "draft", &[TicketSpec::new(5, 1, 1)]).await;
    let app = TestApp::spawn(pool).await;

    for path in [
        format!("/events/{}", draft.event_id),
        format!("/events/{}", Uuid::new_v4()),
        "/events/not-a-uuid".to_owned(),
        "/events/1".to_owned(),
        format!("/orders/{}", Uuid::new_v4()),
        "/orders/garbage".to_owned(),
        "/no/such/page".to_owned(),
    ] {
        let resp = get(&app, &path).await;
        assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{path}");
        let body = resp.text().await.unwrap();
        assert!(body.contains("Not found"), "{path}: {body}");
        assert!(!body.contains("Test concert"), "{path}: {body}");
    }
}

#[sqlx::test]
async fn sold_out_event_page_says_so_and_has_no_buy_form(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(2, 2, 2)]).await;
    let app = TestApp::spawn(pool.clone()).await;
    api_buy(&app, fixture.ticket_type_id(), 2, "all@example.org").await;
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 0);

    let resp = get(&app, &format!("/events/{}", fixture.event_id)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let body = resp.text().await.unwrap();
    assert!(
        body.contains("Sold out. Every ticket has found its owner."),
        "{body}"
    );
    assert!(!body.contains("idempotency_key"), "{body}");
    assert!(!body.contains("Buy tickets"), "{body}");
    assert!(!body.contains("/orders\""), "{body}");
}

#[sqlx::test]
async fn event_page_before_the_sale_opens_says_when_it_opens_and_has_no_form(pool: PgPool) {
    let opens = OffsetDateTime::now_utc() + Span::days(2);
    let fixture =
        event_with_window(&pool, opens, None, "published", &[TicketSpec::new(5, 2, 2)]).await;
    let app = TestApp::spawn(pool).await;

    let resp = get(&app, &format!("/events/{}", fixture.event_id)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let body = resp.text().await.unwrap();
    assert!(
        body.contains(&format!("The sale opens {}.", shown_time(opens))),
        "{body}"
    );
    assert!(
        body.contains(&format!(
            "data-opens-at=\"{}\"",
            opens.unix_timestamp_nanos() / 1_000_000
        )),
        "{body}"
    );
    assert!(!body.contains("idempotency_key"), "{body}");
    assert!(!body.contains("Buy tickets"), "{body}");
}

#[sqlx::test]
async fn buying_through_the_form_redirects_to_the_order_page_which_shows_the_order(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let app = TestApp::spawn(pool.clone()).await;
    let page = get(&app, &format!("/events/{}", fixture.event_id))
        .await
        .text()
        .await
        .unwrap();
    let key = idempotency_key_in(&page);
    let tt = fixture.ticket_type_id().to_string();

    let resp = post_form(
        &app,
        &format!("/events/{}/orders", fixture.event_id),
        &[
            ("ticket_type_id", tt.as_str()),
            ("quantity", "2"),
            ("email", "  Ada@Example.org "),
            ("idempotency_key", key.as_str()),
        ],
    )
    .await;
    let order_id = order_id_from_redirect(&resp);

    let (email, quantity, status, ticket_type_id): (String, i32, String, Uuid) =
        sqlx::query_as("SELECT email, quantity, status, ticket_type_id FROM orders WHERE id = $1")
            .bind(order_id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(
        (email.as_str(), quantity, status.as_str(), ticket_type_id),
        ("ada@example.org", 2, "confirmed", fixture.ticket_type_id())
    );
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 8);

    let resp = get(&app, &format!("/orders/{order_id}")).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let body = resp.text().await.unwrap();
    assert!(body.contains("You have 2 tickets"), "{body}");
    assert!(body.contains("Order confirmed"), "{body}");
    assert!(body.contains("2 × General admission 0"), "{body}");
    assert!(body.contains("50.00 EUR"), "{body}");
    assert!(body.contains("ada@example.org"), "{body}");
    assert!(body.contains(&order_id.to_string()), "{body}");
    assert!(
        body.contains(&format!("action=\"/orders/{order_id}/cancel\"")),
        "{body}"
    );
    assert_eq!(order_count(&pool).await, 1);
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn resubmitting_the_buy_form_with_the_same_key_lands_on_the_same_order(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 8)]).await;
    let app = TestApp::spawn(pool.clone()).await;
    let tt = fixture.ticket_type_id().to_string();
    let key = Uuid::new_v4().to_string();
    let fields = [
        ("ticket_type_id", tt.as_str()),
        ("quantity", "3"),
        ("email", "ada@example.org"),
        ("idempotency_key", key.as_str()),
    ];
    let path = format!("/events/{}/orders", fixture.event_id);

    let first = order_id_from_redirect(&post_form(&app, &path, &fields).await);
    let second = order_id_from_redirect(&post_form(&app, &path, &fields).await);
    assert_eq!(first, second);
    assert_eq!(order_count(&pool).await, 1);
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 7);
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn cancelling_an_order_through_the_page_returns_its_tickets_once(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let app = TestApp::spawn(pool.clone()).await;
    let order_id = api_buy(&app, fixture.ticket_type_id(), 3, "ada@example.org").await;
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 7);

    let resp = post_button(&app, &format!("/orders/{order_id}/cancel")).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), format!("/orders/{order_id}"));
    assert_eq!(order_status(&pool, order_id).await, "cancelled");
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 10);

    // A double click: the same redirect, and the tickets come back only once.
    let resp = post_button(&app, &format!("/orders/{order_id}/cancel")).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), format!("/orders/{order_id}"));
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 10);

    let body = get(&app, &format!("/orders/{order_id}"))
        .await
        .text()
        .await
        .unwrap();
    assert!(body.contains("Order cancelled"), "{body}");
    assert!(!body.contains("Cancel this order"), "{body}");
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn cancelling_an_unknown_order_through_the_page_is_not_found(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let resp = post_button(&app, &format!("/orders/{}/cancel", Uuid::new_v4())).await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let resp = post_button(&app, "/orders/nope/cancel").await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
}

#[sqlx::test]
async fn buy_form_with_missing_fields_comes_back_with_the_error_and_nothing_is_written(
    pool: PgPool,
) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let app = TestApp::spawn(pool.clone()).await;
    let tt = fixture.ticket_type_id().to_string();
    let key = Uuid::new_v4().to_string();
    let path = format!("/events/{}/orders", fixture.event_id);
    let all = [
        ("ticket_type_id", tt.as_str()),
        ("quantity", "2"),
        ("email", "missing@example.org"),
        ("idempotency_key", key.as_str()),
    ];
    let cases = [
        ("ticket_type_id", "Choose a ticket type."),
        ("quantity", "Choose how many tickets you want."),
        ("email", "Enter your email address."),
        ("idempotency_key", "An idempotency key is required"),
    ];
    for (missing, message) in cases {
        let fields: Vec<_> = all
            .iter()
            .copied()
            .filter(|(name, _)| *name != missing)
            .collect();
        let resp = post_form(&app, &path, &fields).await;
        assert_eq!(
            resp.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "without {missing}"
        );
        let body = resp.text().await.unwrap();
        assert!(body.contains(message), "without {missing}: {body}");
        assert!(body.contains("role=\"alert\""), "without {missing}: {body}");
        // The form comes back, filled in with what was sent.
        assert!(body.contains("Buy tickets"), "without {missing}: {body}");
        if missing != "email" {
            assert!(
                body.contains("value=\"missing@example.org\""),
                "without {missing}: {body}"
            );
        }
        // A fresh key replaces a missing one, so the next try can succeed.
        Uuid::parse_str(&idempotency_key_in(&body)).unwrap();
    }

    // Nothing at all.
    let resp = post_raw_form(&app, &path, String::new()).await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);

    assert_eq!(order_count(&pool).await, 0);
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 10);
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn buy_form_refuses_out_of_range_and_non_numeric_quantities(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(1000, 100, 100)]).await;
    let app = TestApp::spawn(pool.clone()).await;
    let tt = fixture.ticket_type_id().to_string();
    let path = format!("/events/{}/orders", fixture.event_id);

    let cases = [
        ("0", "Choose at least 1 ticket."),
        ("-1", "Choose at least 1 ticket."),
        ("101", "At most 100 tickets fit in one order."),
        (
            "99999999999999999999",
            "At most 100 tickets fit in one order.",
        ),
        ("abc", "&quot;abc&quot; is not a whole number of tickets."),
        ("1.5", "&quot;1.5&quot; is not a whole number of tickets."),
        ("1e3", "&quot;1e3&quot; is not a whole number of tickets."),
    ];
    for (quantity, message) in cases {
        let key = Uuid::new_v4().to_string();
        let resp = post_form(
            &app,
            &path,
            &[
                ("ticket_type_id", tt.as_str()),
                ("quantity", quantity),
                ("email", "typed@example.org"),
                ("idempotency_key", key.as_str()),
            ],
        )
        .await;
        assert_eq!(
            resp.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "quantity {quantity}"
        );
        let body = resp.text().await.unwrap();
        assert!(body.contains(message), "quantity {quantity}: {body}");
        assert!(
            body.contains("value=\"typed@example.org\""),
            "quantity {quantity}: {body}"
        );
        assert!(
            body.contains(&format!("value=\"{quantity}\"")),
            "quantity {quantity}: {body}"
        );
        assert!(
            body.contains("aria-invalid=\"true\""),
            "quantity {quantity}: {body}"
        );
        // The same key comes back, so a corrected resubmission stays idempotent.
        assert_eq!(idempotency_key_in(&body), key);
    }
    assert_eq!(order_count(&pool).await, 0);
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 1000);
}

#[sqlx::test]
async fn buy_form_refuses_malformed_emails_and_keeps_what_was_typed(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let app = TestApp::spawn(pool.clone()).await;
    let tt = fixture.ticket_type_id().to_string();
    let path = format!("/events/{}/orders", fixture.event_id);

    let cases = [
        ("ada", "&quot;ada&quot; is not a valid email address."),
        ("ada@", "&quot;ada@&quot; is not a valid email address."),
        (
            "ada@example",
            "&quot;ada@example&quot; is not a valid email address.",
        ),
        ("", "Enter your email address."),
        ("   ", "Enter your email address."),
    ];
    for (email, message) in cases {
        let key = Uuid::new_v4().to_string();
        let resp = post_form(
            &app,
            &path,
            &[
                ("ticket_type_id", tt.as_str()),
                ("quantity", "3"),
                ("email", email),
                ("idempotency_key", key.as_str()),
            ],
        )
        .await;
        assert_eq!(
            resp.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "email {email:?}"
        );
        let body = resp.text().await.unwrap();
        assert!(body.contains(message), "email {email:?}: {body}");
        assert!(
            body.contains(&format!(
                "name=\"email\" autocomplete=\"email\" required value=\"{email}\""
            )),
            "email {email:?}: {body}"
        );
        assert!(body.contains("value=\"3\""), "email {email:?}: {body}");
    }
    assert_eq!(order_count(&pool).await, 0);
}

#[sqlx::test]
async fn buy_form_escapes_what_was_typed_when_it_comes_back(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let app = TestApp::spawn(pool.clone()).await;
    let tt = fixture.ticket_type_id().to_string();
    let resp = post_form(
        &app,
        &format!("/events/{}/orders", fixture.event_id),
        &[
            ("ticket_type_id", tt.as_str()),
            ("quantity", "1"),
            ("email", "\"><script>alert(1)</script>"),
            ("idempotency_key", "k-1"),
        ],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body = resp.text().await.unwrap();
    assert!(!body.contains("<script>alert(1)</script>"), "{body}");
    assert!(
        body.contains("&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{body}"
    );
    assert_eq!(order_count(&pool).await, 0);
}

#[sqlx::test]
async fn buy_form_with_an_unknown_ticket_type_is_not_found(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let app = TestApp::spawn(pool.clone()).await;
    let unknown = Uuid::new_v4().to_string();
    let resp = post_form(
        &app,
        &format!("/events/{}/orders", fixture.event_id),
        &[
            ("ticket_type_id", unknown.as_str()),
            ("quantity", "1"),
            ("email", "lost@example.org"),
            ("idempotency_key", "key-unknown-type"),
        ],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let body = resp.text().await.unwrap();
    assert!(body.contains("We could not find that."), "{body}");
    assert!(body.contains("value=\"lost@example.org\""), "{body}");

    // An id that is not a UUID at all is an invalid field, not a lookup.
    let resp = post_form(
        &app,
        &format!("/events/{}/orders", fixture.event_id),
        &[
            ("ticket_type_id", "standing"),
            ("quantity", "1"),
            ("email", "lost@example.org"),
            ("idempotency_key", "key-unknown-type"),
        ],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(resp.text().await.unwrap().contains("Choose a ticket type."));

    // Buying on an event that does not exist.
    let tt = fixture.ticket_type_id().to_string();
    let resp = post_form(
        &app,
        "/events/not-an-id/orders",
        &[
            ("ticket_type_id", tt.as_str()),
            ("quantity", "1"),
            ("email", "lost@example.org"),
            ("idempotency_key", "key-no-event"),
        ],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    assert_eq!(order_count(&pool).await, 0);
}

#[sqlx::test]
async fn buy_form_for_a_ticket_type_of_another_event_is_refused(pool: PgPool) {
    let shown = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let other = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let app = TestApp::spawn(pool.clone()).await;
    let tt = other.ticket_type_id().to_string();
    let resp = post_form(
        &app,
        &format!("/events/{}/orders", shown.event_id),
        &[
            ("ticket_type_id", tt.as_str()),
            ("quantity", "1"),
            ("email", "mixed@example.org"),
            ("idempotency_key", "key-mixed"),
        ],
    )
    .await;
    // The URL names the event being bought; a ticket type of another event
    // does not exist on it.
    assert_eq!(
        resp.status(),
        StatusCode::NOT_FOUND,
        "Location: {:?}",
        resp.headers().get("location")
    );
    assert_eq!(order_count(&pool).await, 0);
    assert_eq!(remaining(&pool, other.ticket_type_id()).await, 10);
}

#[sqlx::test]
async fn buy_form_over_the_per_order_limit_or_the_stock_is_a_conflict(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(3, 4, 4)]).await;
    let app = TestApp::spawn(pool.clone()).await;
    let tt = fixture.ticket_type_id().to_string();
    let path = format!("/events/{}/orders", fixture.event_id);

    let cases = [
        ("5", "At most 4 tickets of this type fit in one order."),
        ("4", "Only 3 left of this ticket type; choose fewer."),
    ];
    for (quantity, message) in cases {
        let resp = post_form(
            &app,
            &path,
            &[
                ("ticket_type_id", tt.as_str()),
                ("quantity", quantity),
                ("email", "greedy@example.org"),
                ("idempotency_key", "key-greedy"),
            ],
        )
        .await;
        assert_eq!(resp.status(), StatusCode::CONFLICT, "quantity {quantity}");
        let body = resp.text().await.unwrap();
        assert!(body.contains(message), "quantity {quantity}: {body}");
        assert!(
            body.contains("value=\"greedy@example.org\""),
            "quantity {quantity}: {body}"
        );
        assert!(
            body.contains(&format!("value=\"{quantity}\"")),
            "quantity {quantity}: {body}"
        );
        assert_eq!(idempotency_key_in(&body), "key-greedy");
    }
    assert_eq!(order_count(&pool).await, 0);
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 3);

    // The same key with a quantity that fits now succeeds: refusals wrote nothing.
    let resp = post_form(
        &app,
        &path,
        &[
            ("ticket_type_id", tt.as_str()),
            ("quantity", "3"),
            ("email", "greedy@example.org"),
            ("idempotency_key", "key-greedy"),
        ],
    )
    .await;
    order_id_from_redirect(&resp);
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 0);
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn buy_form_over_the_buyer_limit_is_a_conflict(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(20, 2, 3)]).await;
    let app = TestApp::spawn(pool.clone()).await;
    api_buy(&app, fixture.ticket_type_id(), 2, "fan@example.org").await;
    let tt = fixture.ticket_type_id().to_string();
    let resp = post_form(
        &app,
        &format!("/events/{}/orders", fixture.event_id),
        &[
            ("ticket_type_id", tt.as_str()),
            ("quantity", "2"),
            ("email", "FAN@example.org"),
            ("idempotency_key", "key-second"),
        ],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::CONFLICT);
    let body = resp.text().await.unwrap();
    assert!(
        body.contains(
            "Each buyer may hold at most 3 tickets of this type; this purchase would go beyond that."
        ),
        "{body}"
    );
    assert_eq!(order_count(&pool).await, 1);
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 18);
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn buy_form_before_the_sale_opens_is_forbidden(pool: PgPool) {
    let opens = OffsetDateTime::now_utc() + Span::days(1);
    let fixture = event_with_window(
        &pool,
        opens,
        None,
        "published",
        &[TicketSpec::new(10, 4, 4)],
    )
    .await;
    let app = TestApp::spawn(pool.clone()).await;
    let tt = fixture.ticket_type_id().to_string();
    let resp = post_form(
        &app,
        &format!("/events/{}/orders", fixture.event_id),
        &[
            ("ticket_type_id", tt.as_str()),
            ("quantity", "1"),
            ("email", "early@example.org"),
            ("idempotency_key", "key-early"),
        ],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    let body = resp.text().await.unwrap();
    assert!(
        body.contains(&format!(
            "The sale has not opened yet; it opens at {}.",
            shown_time(opens)
        )),
        "{body}"
    );
    assert!(!body.contains("Buy tickets"), "{body}");
    assert_eq!(order_count(&pool).await, 0);
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 10);
}

#[sqlx::test]
async fn buy_form_on_a_draft_event_is_not_found(pool: PgPool) {
    let opened = opened();
    let fixture =
        event_with_window(&pool, opened, None, "draft", &[TicketSpec::new(10, 4, 4)]).await;
    let app = TestApp::spawn(pool.clone()).await;
    let tt = fixture.ticket_type_id().to_string();
    let resp = post_form(
        &app,
        &format!("/events/{}/orders", fixture.event_id),
        &[
            ("ticket_type_id", tt.as_str()),
            ("quantity", "1"),
            ("email", "sneaky@example.org"),
            ("idempotency_key", "key-draft"),
        ],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    assert_eq!(order_count(&pool).await, 0);
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 10);
}

#[sqlx::test]
async fn buy_form_body_over_64_kib_is_refused_with_413(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let app = TestApp::spawn(pool.clone()).await;
    let tt = fixture.ticket_type_id().to_string();
    let padding = "x".repeat(64 * 1024);
    let resp = post_form(
        &app,
        &format!("/events/{}/orders", fixture.event_id),
        &[
            ("ticket_type_id", tt.as_str()),
            ("quantity", "1"),
            ("email", "big@example.org"),
            ("idempotency_key", "key-big"),
            ("padding", padding.as_str()),
        ],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert!(
        resp.text()
            .await
            .unwrap()
            .contains("The request body is too large.")
    );
    assert_eq!(order_count(&pool).await, 0);
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 10);
}

// ---------------------------------------------------------------------------
// JSON API
// ---------------------------------------------------------------------------

fn api_event(title: &str, status: Option<&str>) -> Value {
    let mut body = json!({
        "title": title,
        "venue": "API hall",
        "description": "Made by a script.",
        "starts_at": "2030-03-01T19:30:00Z",
        "sale_opens_at": "2020-01-01T10:00:00Z",
        "ticket_types": [
            {"name": "Standing", "price_minor": 2500, "currency": "EUR", "capacity": 100,
             "max_per_order": 4, "max_per_buyer": 6},
            {"name": "Seated", "price_minor": 4000, "currency": "eur", "capacity": 50},
        ],
    });
    if let Some(status) = status {
        body["status"] = json!(status);
    }
    body
}

#[sqlx::test]
async fn api_creates_an_event_with_its_ticket_types(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("api@example.org").await;
    let resp = api_create_event(&org, &api_event("API concert", Some("published"))).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let body: Value = resp.json().await.unwrap();
    let id = Uuid::parse_str(body["id"].as_str().unwrap()).unwrap();
    assert_eq!(body["status"], "published");
    assert_eq!(body["title"], "API concert");
    assert_eq!(body["venue"], "API hall");
    assert_eq!(body["starts_at"], "2030-03-01T19:30:00Z");
    let tts = body["ticket_types"].as_array().unwrap();
    assert_eq!(tts.len(), 2);
    assert_eq!(tts[0]["name"], "Standing");
    assert_eq!(tts[0]["capacity"], 100);
    assert_eq!(tts[0]["remaining"], 100);
    assert_eq!(tts[0]["price_minor"], 2500);
    assert_eq!(tts[0]["max_per_order"], 4);
    assert_eq!(tts[0]["max_per_buyer"], 6);
    assert_eq!(tts[1]["name"], "Seated");
    assert_eq!(tts[1]["currency"], "EUR");
    assert_eq!(tts[1]["capacity"], 50);
    assert_eq!(tts[1]["remaining"], 50);
    assert_eq!(tts[1]["max_per_order"], 10);
    assert_eq!(tts[1]["max_per_buyer"], 10);

    let in_db: Vec<(Uuid, i32, i32)> = sqlx::query_as(
        "SELECT id, capacity, remaining FROM ticket_types WHERE event_id = $1 ORDER BY position",
    )
    .bind(id)
    .fetch_all(&pool)
    .await
    .unwrap();
    let returned: Vec<(Uuid, i32, i32)> = tts
        .iter()
        .map(|t| {
            (
                Uuid::parse_str(t["id"].as_str().unwrap()).unwrap(),
                t["capacity"].as_i64().unwrap() as i32,
                t["remaining"].as_i64().unwrap() as i32,
            )
        })
        .collect();
    assert_eq!(in_db, returned);
    assert_eq!(event_status(&pool, id).await, "published");
    // The event belongs to the organizer whose token created it.
    let owner: Option<Uuid> = sqlx::query_scalar("SELECT organizer_id FROM events WHERE id = $1")
        .bind(id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(owner, Some(org.id));
}

#[sqlx::test]
async fn api_event_creation_rejects_invalid_input_and_writes_nothing(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("api@example.org").await;
    let mut missing_venue = api_event("No venue", None);
    missing_venue.as_object_mut().unwrap().remove("venue");
    let mut negative = api_event("Negative", None);
    negative["ticket_types"][1]["capacity"] = json!(-5);
    let mut no_types = api_event("Empty", None);
    no_types["ticket_types"] = json!([]);
    let mut bad_date = api_event("Bad date", None);
    bad_date["starts_at"] = json!("next friday");
    let mut unknown_field = api_event("Extra", None);
    unknown_field["colour"] = json!("red");
    let bad_status = api_event("Status", Some("live"));

    let cases = [
        (missing_venue, "venue"),
        (negative, "ticket_types[1].capacity"),
        (no_types, "ticket_types"),
        (bad_date, "starts_at"),
        (bad_status, "status"),
    ];
    for (body, field) in cases {
        let resp = api_create_event(&org, &body).await;
        assert_api_error(
            resp,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
            Some(field),
        )
        .await;
    }
    let resp = api_create_event(&org, &unknown_field).await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(event_count(&pool).await, 0);
    assert_eq!(ticket_type_count(&pool).await, 0);
}

#[sqlx::test]
async fn api_lists_and_shows_published_events_only(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("api@example.org").await;
    let published: Value = api_create_event(&org, &api_event("Public", Some("published")))
        .await
        .json()
        .await
        .unwrap();
    let draft: Value = api_create_event(&org, &api_event("Hidden", None))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(draft["status"], "draft");
    let published_id = published["id"].as_str().unwrap();
    let draft_id = draft["id"].as_str().unwrap();
    let standing = Uuid::parse_str(published["ticket_types"][0]["id"].as_str().unwrap()).unwrap();
    api_buy(&app, standing, 3, "ada@example.org").await;

    let resp = get(&app, "/api/v1/events").await;
    assert_eq!(resp.status(), StatusCode::OK);
    let list: Value = resp.json().await.unwrap();
    let events = list["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{list}");
    assert_eq!(events[0]["id"], published_id);
    assert_eq!(events[0]["status"], "published");
    assert_eq!(events[0]["ticket_types"][0]["capacity"], 100);
    assert_eq!(events[0]["ticket_types"][0]["remaining"], 97);
    assert_eq!(events[0]["ticket_types"][1]["remaining"], 50);

    let resp = get(&app, &format!("/api/v1/events/{published_id}")).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let one: Value = resp.json().await.unwrap();
    assert_eq!(one["id"], published_id);
    assert_eq!(one["title"], "Public");
    assert_eq!(one["ticket_types"][0]["id"], standing.to_string());
    assert_eq!(one["ticket_types"][0]["capacity"], 100);
    assert_eq!(one["ticket_types"][0]["remaining"], 97);

    for path in [
        format!("/api/v1/events/{draft_id}"),
        format!("/api/v1/events/{}", Uuid::new_v4()),
        "/api/v1/events/garbage".to_owned(),
    ] {
        let resp = get(&app, &path).await;
        assert_api_error(resp, StatusCode::NOT_FOUND, "not_found", None).await;
    }
}

#[sqlx::test]
async fn api_order_is_created_replayed_with_the_same_key_and_conflicts_on_a_different_quantity(
    pool: PgPool,
) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 8)]).await;
    let app = TestApp::spawn(pool.clone()).await;
    let request = json!({
        "ticket_type_id": fixture.ticket_type_id(),
        "quantity": 2,
        "email": "Ada@Example.org",
        "idempotency_key": "order-1",
    });

    let resp = post_json(&app, "/api/v1/orders", &request).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let created: Value = resp.json().await.unwrap();
    assert_eq!(created["quantity"], 2);
    assert_eq!(created["email"], "ada@example.org");
    assert_eq!(created["status"], "confirmed");
    assert_eq!(created["unit_price_minor"], 2500);
    assert_eq!(created["currency"], "EUR");
    assert_eq!(
        created["ticket_type_id"],
        fixture.ticket_type_id().to_string()
    );

    let resp = post_json(&app, "/api/v1/orders", &request).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let replayed: Value = resp.json().await.unwrap();
    assert_eq!(replayed["id"], created["id"]);
    assert_eq!(order_count(&pool).await, 1);
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 8);

    let mut different = request.clone();
    different["quantity"] = json!(3);
    let resp = post_json(&app, "/api/v1/orders", &different).await;
    assert_api_error(
        resp,
        StatusCode::CONFLICT,
        "idempotency_conflict",
        Some("idempotency_key"),
    )
    .await;
    assert_eq!(order_count(&pool).await, 1);
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 8);
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn api_get_and_cancel_order_then_a_second_cancel_is_already_cancelled(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let app = TestApp::spawn(pool.clone()).await;
    let order_id = api_buy(&app, fixture.ticket_type_id(), 4, "ada@example.org").await;

    let resp = get(&app, &format!("/api/v1/orders/{order_id}")).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let order: Value = resp.json().await.unwrap();
    assert_eq!(order["id"], order_id.to_string());
    assert_eq!(order["quantity"], 4);
    assert_eq!(order["status"], "confirmed");

    let resp = post_empty(&app, &format!("/api/v1/orders/{order_id}/cancel")).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let cancelled: Value = resp.json().await.unwrap();
    assert_eq!(cancelled["id"], order_id.to_string());
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(order_status(&pool, order_id).await, "cancelled");
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 10);

    let resp = post_empty(&app, &format!("/api/v1/orders/{order_id}/cancel")).await;
    assert_api_error(resp, StatusCode::CONFLICT, "already_cancelled", None).await;
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 10);

    let order: Value = get(&app, &format!("/api/v1/orders/{order_id}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(order["status"], "cancelled");

    for path in [
        format!("/api/v1/orders/{}", Uuid::new_v4()),
        "/api/v1/orders/garbage".to_owned(),
    ] {
        assert_api_error(
            get(&app, &path).await,
            StatusCode::NOT_FOUND,
            "not_found",
            None,
        )
        .await;
    }
    let resp = post_empty(&app, &format!("/api/v1/orders/{}/cancel", Uuid::new_v4())).await;
    assert_api_error(resp, StatusCode::NOT_FOUND, "not_found", None).await;
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn api_rejects_invalid_order_fields_naming_the_field(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let app = TestApp::spawn(pool.clone()).await;
    let valid = json!({
        "ticket_type_id": fixture.ticket_type_id(),
        "quantity": 1,
        "email": "ada@example.org",
        "idempotency_key": "k-1",
    });
    let changed = |name: &str, value: Value| {
        let mut body = valid.clone();
        body[name] = value;
        body
    };
    let removed = |name: &str| {
        let mut body = valid.clone();
        body.as_object_mut().unwrap().remove(name);
        body
    };

    let cases = [
        (changed("quantity", json!(0)), "quantity"),
        (changed("quantity", json!(-1)), "quantity"),
        (changed("quantity", json!(101)), "quantity"),
        (changed("quantity", json!("abc")), "quantity"),
        (changed("quantity", json!("1")), "quantity"),
        (changed("quantity", json!(1.5)), "quantity"),
        (
            changed("quantity", json!(99_999_999_999_999_999_999.0)),
            "quantity",
        ),
        (changed("quantity", Value::Null), "quantity"),
        (removed("quantity"), "quantity"),
        (removed("email"), "email"),
        (changed("email", json!("ada")), "email"),
        (changed("email", json!("ada@")), "email"),
        (changed("email", json!("")), "email"),
        (changed("email", json!(42)), "email"),
        (
            changed("ticket_type_id", json!("not-a-uuid")),
            "ticket_type_id",
        ),
        (removed("ticket_type_id"), "ticket_type_id"),
        (changed("idempotency_key", json!("")), "idempotency_key"),
        (
            changed("idempotency_key", json!("has space")),
            "idempotency_key",
        ),
        (removed("idempotency_key"), "idempotency_key"),
        (changed("surprise", json!(true)), "surprise"),
    ];
    for (body, field) in cases {
        let resp = post_json(&app, "/api/v1/orders", &body).await;
        assert_api_error(
            resp,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
            Some(field),
        )
        .await;
    }
    assert_eq!(order_count(&pool).await, 0);
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 10);
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn api_refuses_unknown_ticket_types_sold_out_not_enough_left_and_limits(pool: PgPool) {
    let fixture = published_event(
        &pool,
        &[
            TicketSpec::new(1, 1, 1),
            TicketSpec::new(5, 5, 5),
            TicketSpec::new(50, 2, 3),
        ],
    )
    .await;
    let app = TestApp::spawn(pool.clone()).await;
    let [tiny, small, limited] = fixture.ticket_type_ids[..] else {
        panic!("three ticket types")
    };
    api_buy(&app, tiny, 1, "first@example.org").await;
    api_buy(&app, small, 4, "first@example.org").await;
    api_buy(&app, limited, 2, "fan@example.org").await;
    let orders = order_count(&pool).await;
    assert_eq!(orders, 3);

    let order = |tt: Uuid, quantity: i64, email: &str| {
        json!({
            "ticket_type_id": tt,
            "quantity": quantity,
            "email": email,
            "idempotency_key": Uuid::new_v4().to_string(),
        })
    };
    let cases = [
        (
            order(Uuid::new_v4(), 1, "b@example.org"),
            StatusCode::NOT_FOUND,
            "not_found",
            None,
        ),
        (
            order(tiny, 1, "b@example.org"),
            StatusCode::CONFLICT,
            "sold_out",
            None,
        ),
        (
            order(small, 2, "b@example.org"),
            StatusCode::CONFLICT,
            "not_enough_left",
            Some("quantity"),
        ),
        (
            order(limited, 3, "b@example.org"),
            StatusCode::CONFLICT,
            "limit_exceeded",
            Some("quantity"),
        ),
        (
            order(limited, 2, "fan@example.org"),
            StatusCode::CONFLICT,
            "limit_exceeded",
            Some("quantity"),
        ),
    ];
    for (body, status, code, field) in cases {
        let error = assert_api_error(
            post_json(&app, "/api/v1/orders", &body).await,
            status,
            code,
            field,
        )
        .await;
        if code == "not_enough_left" {
            assert_eq!(
                error["error"]["message"],
                "Only 1 left of this ticket type; choose fewer."
            );
        }
    }
    assert_eq!(order_count(&pool).await, orders);
    assert_eq!(remaining(&pool, tiny).await, 0);
    assert_eq!(remaining(&pool, small).await, 1);
    assert_eq!(remaining(&pool, limited).await, 48);
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn api_order_before_the_sale_opens_is_forbidden(pool: PgPool) {
    let opens = OffsetDateTime::now_utc() + Span::days(1);
    let fixture = event_with_window(
        &pool,
        opens,
        None,
        "published",
        &[TicketSpec::new(10, 4, 4)],
    )
    .await;
    let app = TestApp::spawn(pool.clone()).await;
    let resp = post_json(
        &app,
        "/api/v1/orders",
        &json!({
            "ticket_type_id": fixture.ticket_type_id(),
            "quantity": 1,
            "email": "early@example.org",
            "idempotency_key": "early",
        }),
    )
    .await;
    assert_api_error(resp, StatusCode::FORBIDDEN, "sale_not_open", None).await;
    assert_eq!(order_count(&pool).await, 0);
}

#[sqlx::test]
async fn api_rejects_malformed_json_and_wrong_content_type_with_400(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let app = TestApp::spawn(pool.clone()).await;
    let valid = json!({
        "ticket_type_id": fixture.ticket_type_id(),
        "quantity": 1,
        "email": "ada@example.org",
        "idempotency_key": "k-1",
    })
    .to_string();

    let malformed = [
        "{\"ticket_type_id\": ".to_owned(),
        "{not json}".to_owned(),
        String::new(),
        format!("{valid} trailing"),
    ];
    for body in malformed {
        let resp = app
            .client
            .post(app.url("/api/v1/orders"))
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_api_error(resp, StatusCode::BAD_REQUEST, "invalid", None).await;
    }

    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        None,
    ] {
        let mut request = app
            .client
            .post(app.url("/api/v1/orders"))
            .body(valid.clone());
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        let resp = request.send().await.unwrap();
        assert_api_error(resp, StatusCode::BAD_REQUEST, "invalid", None).await;
    }

    let org = app.organizer("api@example.org").await;
    let resp = org
        .api(Method::POST, "/api/v1/organizer/events")
        .header("content-type", "text/plain")
        .body(api_event("Plain", None).to_string())
        .send()
        .await
        .unwrap();
    assert_api_error(resp, StatusCode::BAD_REQUEST, "invalid", None).await;

    assert_eq!(order_count(&pool).await, 0);
    assert_eq!(event_count(&pool).await, 1);
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn api_unknown_route_is_a_json_not_found(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    for path in ["/api/v1/nope", "/api/v2/events", "/api/v1/events/a/b"] {
        let resp = get(&app, path).await;
        assert_api_error(resp, StatusCode::NOT_FOUND, "not_found", None).await;
    }
    let resp = post_json(&app, "/api/v1/nothing/here", &json!({})).await;
    assert_api_error(resp, StatusCode::NOT_FOUND, "not_found", None).await;
}

#[sqlx::test]
async fn api_body_over_64_kib_is_refused_with_413(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let app = TestApp::spawn(pool.clone()).await;
    let body = json!({
        "ticket_type_id": fixture.ticket_type_id(),
        "quantity": 1,
        "email": "big@example.org",
        "idempotency_key": "x".repeat(64 * 1024),
    });
    let resp = post_json(&app, "/api/v1/orders", &body).await;
    assert_api_error(
        resp,
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        None,
    )
    .await;

    let mut event = api_event("Huge", Some("published"));
    event["description"] = json!("y".repeat(70 * 1024));
    let org = app.organizer("api@example.org").await;
    let resp = api_create_event(&org, &event).await;
    assert_api_error(
        resp,
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        None,
    )
    .await;

    assert_eq!(order_count(&pool).await, 0);
    assert_eq!(event_count(&pool).await, 1);
    assert_invariants(&pool).await;
}

// ---------------------------------------------------------------------------
// Organizer pages
// ---------------------------------------------------------------------------

// Organizer pages need a logged-in organizer (`TestApp::organizer`) and only
// show that organizer's events, so every event here is created through the
// organizer's own API token or form. Access control itself is tested in
// tests/organizer_access.rs.

#[sqlx::test]
async fn organizer_overview_lists_every_event_including_drafts(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let published = owned_published_event(&org, &[TicketSpec::new(10, 4, 4)]).await;
    let opened = opened();
    let draft = owned_event(&org, opened, "draft", &[TicketSpec::new(7, 4, 4)]).await;
    api_buy(&app, published.ticket_type_id(), 3, "ada@example.org").await;

    let resp = org.get("/organizer").await;
    assert_eq!(resp.status(), StatusCode::OK);
    let body = resp.text().await.unwrap();
    assert!(
        body.contains(&format!(
            "href=\"/organizer/events/{}\"",
            published.event_id
        )),
        "{body}"
    );
    assert!(
        body.contains(&format!("href=\"/organizer/events/{}\"", draft.event_id)),
        "{body}"
    );
    assert!(body.contains(">draft<"), "{body}");
    assert!(body.contains(">published<"), "{body}");
    assert!(body.contains("3 / 10"), "{body}");
    assert!(body.contains("0 / 7"), "{body}");
    assert!(body.contains("href=\"/organizer/events/new\""), "{body}");
}

#[sqlx::test]
async fn organizer_new_event_form_has_every_field(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let org = app.organizer("org@example.org").await;
    let resp = org.get("/organizer/events/new").await;
    assert_eq!(resp.status(), StatusCode::OK);
    let body = resp.text().await.unwrap();
    assert!(body.contains("action=\"/organizer/events\""), "{body}");
    for name in [
        "title",
        "venue",
        "description",
        "starts_at",
        "sale_opens_at",
        "sale_closes_at",
        "status",
        "tt_name_0",
        "tt_price_0",
        "tt_currency_0",
        "tt_capacity_0",
        "tt_max_per_order_0",
        "tt_max_per_buyer_0",
        "tt_name_2",
        "csrf_token",
    ] {
        assert!(
            body.contains(&format!("name=\"{name}\"")),
            "no {name} input: {body}"
        );
    }
    assert!(!body.contains("tt_id_"), "{body}");
}

#[sqlx::test]
async fn organizer_creates_an_event_from_the_form_and_redirects_to_its_page(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let fields = new_event_form("Form concert & friends");
    let resp = org.post_form("/organizer/events", &borrowed(&fields)).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let event_page = location(&resp);
    let id = Uuid::parse_str(event_page.strip_prefix("/organizer/events/").unwrap()).unwrap();

    let (title, venue, status, starts_at, owner): (
        String,
        String,
        String,
        OffsetDateTime,
        Option<Uuid>,
    ) = sqlx::query_as(
        "SELECT title, venue, status, starts_at, organizer_id FROM events WHERE id = $1",
    )
    .bind(id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        (title.as_str(), venue.as_str(), status.as_str()),
        ("Form concert & friends", "Main hall", "published")
    );
    assert_eq!(form_time(starts_at), "2030-03-01T19:30");
    assert_eq!(owner, Some(org.id), "the event belongs to its creator");
    let tts: Vec<(String, i64, String, i32, i32, i32, i32)> = sqlx::query_as(
        "SELECT name, price_minor, currency, capacity, remaining, max_per_order, max_per_buyer
         FROM ticket_types WHERE event_id = $1",
    )
    .bind(id)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        tts,
        vec![(
            "Standing".to_owned(),
            2500,
            "EUR".to_owned(),
            120,
            120,
            4,
            6
        )]
    );

    // The redirect target is the event's organizer page (its content is the
    // dashboard's business); its edit form shows the event, and buyers can
    // see it.
    let resp = org.get(&event_page).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let resp = org.get(&format!("{event_page}/edit")).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let body = resp.text().await.unwrap();
    assert!(body.contains("Form concert &amp; friends"), "{body}");
    assert!(body.contains("on sale now"), "{body}");
    let public = get(&app, &format!("/events/{id}")).await;
    assert_eq!(public.status(), StatusCode::OK);
    assert!(public.text().await.unwrap().contains("120 of 120 left"));

    // Without the checkbox, the event stays a draft.
    let draft_fields = without(&fields, "status");
    let resp = org
        .post_form("/organizer/events", &borrowed(&draft_fields))
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let draft_id =
        Uuid::parse_str(location(&resp).strip_prefix("/organizer/events/").unwrap()).unwrap();
    assert_eq!(event_status(&pool, draft_id).await, "draft");
    assert_eq!(
        get(&app, &format!("/events/{draft_id}")).await.status(),
        StatusCode::NOT_FOUND
    );
}

#[sqlx::test]
async fn organizer_form_with_invalid_input_comes_back_with_the_message_and_writes_nothing(
    pool: PgPool,
) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let valid = new_event_form("Kept title");
    let no_types = {
        let mut fields = valid.clone();
        for name in [
            "tt_name_0",
            "tt_price_0",
            "tt_capacity_0",
            "tt_max_per_order_0",
            "tt_max_per_buyer_0",
        ] {
            fields = with(&fields, name, "");
        }
        fields
    };
    let cases = [
        (with(&valid, "title", ""), "This field is required.", false),
        (without(&valid, "title"), "This field is required.", false),
        (
            with(&valid, "starts_at", "next friday"),
            "&quot;next friday&quot; is not a date and time such as 2027-03-01T19:30.",
            true,
        ),
        (
            with(&valid, "sale_opens_at", "2030-13-01T10:00"),
            "is not a date and time such as 2027-03-01T19:30.",
            true,
        ),
        (
            with(&valid, "tt_capacity_0", "-5"),
            "Enter a number from 0 to 1000000.",
            true,
        ),
        (no_types, "Add at least one ticket type.", true),
        (
            with(&valid, "tt_price_0", "12,50"),
            "&quot;12,50&quot; is not a price such as 12.50.",
            true,
        ),
        (
            with(&valid, "sale_opens_at", "2031-01-01T10:00"),
            "The sale must open before the event starts.",
            true,
        ),
        (
            with(&valid, "tt_max_per_buyer_0", "2"),
            "The limit per buyer cannot be below the limit per order.",
            true,
        ),
    ];
    for (fields, message, title_kept) in cases {
        let resp = org.post_form("/organizer/events", &borrowed(&fields)).await;
        assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY, "{message}");
        let body = resp.text().await.unwrap();
        assert!(body.contains(message), "{message}: {body}");
        assert!(body.contains("role=\"alert\""), "{message}: {body}");
        if message != "Add at least one ticket type." {
            // The input the message is about is marked (a missing row has none).
            assert!(body.contains("aria-invalid=\"true\""), "{message}: {body}");
        }
        if title_kept {
            assert!(body.contains("value=\"Kept title\""), "{message}: {body}");
        }
        assert!(body.contains("value=\"Main hall\""), "{message}: {body}");
        assert!(
            body.contains("action=\"/organizer/events\""),
            "{message}: {body}"
        );
    }
    assert_eq!(event_count(&pool).await, 0);
    assert_eq!(ticket_type_count(&pool).await, 0);
}

#[sqlx::test]
async fn organizer_form_body_over_64_kib_is_refused_with_413(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let huge = "d".repeat(64 * 1024);
    let fields = with(&new_event_form("Huge"), "description", &huge);
    let resp = org.post_form("/organizer/events", &borrowed(&fields)).await;
    assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(event_count(&pool).await, 0);
}

#[sqlx::test]
async fn organizer_edit_page_is_filled_in_with_the_event(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let fixture = owned_published_event(&org, &[TicketSpec::new(10, 4, 8)]).await;
    let resp = org
        .get(&format!("/organizer/events/{}/edit", fixture.event_id))
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let body = resp.text().await.unwrap();
    // The form posts to the route that saves it (POST .../edit).
    assert!(
        body.contains(&format!(
            "action=\"/organizer/events/{}/edit\"",
            fixture.event_id
        )),
        "the edit form does not post to /organizer/events/{{id}}/edit: {body}"
    );
    assert!(
        body.contains(&format!(
            "type=\"hidden\" name=\"tt_id_0\" value=\"{}\"",
            fixture.ticket_type_id()
        )),
        "{body}"
    );
    assert!(body.contains("value=\"Test concert\""), "{body}");
    assert!(
        body.contains("name=\"tt_capacity_0\" type=\"number\" min=\"0\" value=\"10\""),
        "{body}"
    );
    assert!(
        body.contains("name=\"tt_price_0\" inputmode=\"decimal\" value=\"25.00\""),
        "{body}"
    );
    assert!(
        body.contains(&format!(
            "action=\"/organizer/events/{}/unpublish\"",
            fixture.event_id
        )),
        "{body}"
    );

    for path in [
        format!("/organizer/events/{}/edit", Uuid::new_v4()),
        "/organizer/events/zzz/edit".to_owned(),
        format!("/organizer/events/{}", Uuid::new_v4()),
        "/organizer/events/zzz".to_owned(),
    ] {
        assert_eq!(
            org.get(&path).await.status(),
            StatusCode::NOT_FOUND,
            "{path}"
        );
    }
}

#[sqlx::test]
async fn organizer_raising_capacity_raises_remaining_by_the_same_amount(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let fixture = owned_published_event(&org, &[TicketSpec::new(10, 4, 8)]).await;
    let tt = fixture.ticket_type_id();
    api_buy(&app, tt, 3, "ada@example.org").await;
    assert_eq!(capacity_and_remaining(&pool, tt).await, (10, 7));
    let edit = format!("/organizer/events/{}/edit", fixture.event_id);

    let fields = edit_form(tt, "Test concert, bigger", "15");
    let resp = org.post_form(&edit, &borrowed(&fields)).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        location(&resp),
        format!("/organizer/events/{}", fixture.event_id)
    );
    assert_eq!(capacity_and_remaining(&pool, tt).await, (15, 12));
    assert_eq!(
        event_title(&pool, fixture.event_id).await,
        "Test concert, bigger"
    );
    assert_eq!(ticket_type_count(&pool).await, 1);
    assert_invariants(&pool).await;

    // Adding a row on edit adds a ticket type; the first keeps its sales.
    let mut fields = edit_form(tt, "Test concert, bigger", "15");
    fields.extend([
        ("tt_name_1", "Balcony".to_owned()),
        ("tt_price_1", "40".to_owned()),
        ("tt_currency_1", "EUR".to_owned()),
        ("tt_capacity_1", "30".to_owned()),
        ("tt_max_per_order_1", String::new()),
        ("tt_max_per_buyer_1", String::new()),
    ]);
    let resp = org.post_form(&edit, &borrowed(&fields)).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let balcony: (i64, i32, i32) = sqlx::query_as(
        "SELECT price_minor, capacity, remaining FROM ticket_types WHERE event_id = $1 AND name = 'Balcony'",
    )
    .bind(fixture.event_id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(balcony, (4000, 30, 30));
    assert_eq!(capacity_and_remaining(&pool, tt).await, (15, 12));
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn organizer_cannot_lower_capacity_below_tickets_sold(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let fixture = owned_published_event(&org, &[TicketSpec::new(10, 4, 8)]).await;
    let tt = fixture.ticket_type_id();
    api_buy(&app, tt, 3, "ada@example.org").await;
    let edit = format!("/organizer/events/{}/edit", fixture.event_id);

    let fields = edit_form(tt, "Renamed while failing", "2");
    let resp = org.post_form(&edit, &borrowed(&fields)).await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body = resp.text().await.unwrap();
    assert!(
        body.contains("3 tickets of &quot;General admission 0&quot; are already sold; the capacity cannot go below that."),
        "{body}"
    );
    assert!(body.contains("value=\"Renamed while failing\""), "{body}");
    assert!(body.contains("value=\"2\""), "{body}");
    // Nothing changed, not even the title sent along with the capacity.
    assert_eq!(capacity_and_remaining(&pool, tt).await, (10, 7));
    assert_eq!(event_title(&pool, fixture.event_id).await, "Test concert");

    // Exactly the number sold is allowed: nothing left, nothing oversold.
    let fields = edit_form(tt, "Test concert", "3");
    let resp = org.post_form(&edit, &borrowed(&fields)).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(capacity_and_remaining(&pool, tt).await, (3, 0));
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn organizer_edit_with_invalid_input_or_a_foreign_ticket_type_changes_nothing(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let fixture = owned_published_event(&org, &[TicketSpec::new(10, 4, 8)]).await;
    let other = owned_published_event(&org, &[TicketSpec::new(10, 4, 8)]).await;
    let tt = fixture.ticket_type_id();
    let path = format!("/organizer/events/{}/edit", fixture.event_id);

    let fields = with(&edit_form(tt, "Renamed", "10"), "starts_at", "soon");
    let resp = org.post_form(&path, &borrowed(&fields)).await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(resp.text().await.unwrap().contains("value=\"Renamed\""));

    // A ticket type of another event (even one of the same organizer's)
    // cannot be edited through this one.
    let fields = edit_form(other.ticket_type_id(), "Renamed", "99");
    let resp = org.post_form(&path, &borrowed(&fields)).await;
    assert!(resp.status().is_client_error(), "{}", resp.status());
    assert_eq!(
        capacity_and_remaining(&pool, other.ticket_type_id()).await,
        (10, 10)
    );

    let fields = with(&edit_form(tt, "Renamed", "10"), "tt_id_0", "not-an-id");
    let resp = org.post_form(&path, &borrowed(&fields)).await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);

    let fields = edit_form(tt, "Renamed", "10");
    let resp = org
        .post_form(
            &format!("/organizer/events/{}/edit", Uuid::new_v4()),
            &borrowed(&fields),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);

    assert_eq!(event_title(&pool, fixture.event_id).await, "Test concert");
    assert_eq!(event_title(&pool, other.event_id).await, "Test concert");
    assert_eq!(capacity_and_remaining(&pool, tt).await, (10, 10));
    assert_eq!(ticket_type_count(&pool).await, 2);
}

#[sqlx::test]
async fn organizer_publish_and_unpublish_change_the_status(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let opened = opened();
    let fixture = owned_event(&org, opened, "draft", &[TicketSpec::new(10, 4, 4)]).await;
    let page = format!("/organizer/events/{}", fixture.event_id);
    let edit = format!("{page}/edit");

    let body = org.get(&edit).await.text().await.unwrap();
    assert!(
        body.contains(&format!("action=\"{page}/publish\"")),
        "{body}"
    );
    assert_eq!(
        get(&app, &format!("/events/{}", fixture.event_id))
            .await
            .status(),
        StatusCode::NOT_FOUND
    );

    let resp = org.post_form(&format!("{page}/publish"), &[]).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), page);
    assert_eq!(event_status(&pool, fixture.event_id).await, "published");
    assert_eq!(
        get(&app, &format!("/events/{}", fixture.event_id))
            .await
            .status(),
        StatusCode::OK
    );
    let body = org.get(&edit).await.text().await.unwrap();
    assert!(
        body.contains(&format!("action=\"{page}/unpublish\"")),
        "{body}"
    );

    let resp = org.post_form(&format!("{page}/unpublish"), &[]).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), page);
    assert_eq!(event_status(&pool, fixture.event_id).await, "draft");
    assert_eq!(
        get(&app, &format!("/events/{}", fixture.event_id))
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
    let listed: Value = get(&app, "/api/v1/events").await.json().await.unwrap();
    assert_eq!(listed["events"], json!([]));

    for path in [
        format!("/organizer/events/{}/publish", Uuid::new_v4()),
        "/organizer/events/garbage/unpublish".to_owned(),
    ] {
        assert_eq!(
            org.post_form(&path, &[]).await.status(),
            StatusCode::NOT_FOUND,
            "{path}"
        );
    }
}

/// A complete HTML document in the site frame: doctype, title, stylesheet
/// and script (the script makes forms submit once), navigation.
fn assert_full_page(what: &str, body: &str) {
    assert!(
        body.starts_with("<!DOCTYPE html>"),
        "{what}: not a full HTML document: {body}"
    );
    assert!(body.contains("<title>"), "{what}: no <title>: {body}");
    assert!(
        body.contains("href=\"/static/style.css?v="),
        "{what}: no stylesheet: {body}"
    );
    assert!(
        body.contains("src=\"/static/app.js?v="),
        "{what}: no script: {body}"
    );
    assert!(
        body.contains("<nav aria-label=\"Main\">"),
        "{what}: no navigation: {body}"
    );
}

#[sqlx::test]
async fn buyer_and_error_pages_are_full_pages_with_the_site_layout(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let app = TestApp::spawn(pool.clone()).await;
    let order_id = api_buy(&app, fixture.ticket_type_id(), 1, "ada@example.org").await;
    for path in [
        "/".to_owned(),
        format!("/events/{}", fixture.event_id),
        format!("/orders/{order_id}"),
        "/missing".to_owned(),
    ] {
        let body = get(&app, &path).await.text().await.unwrap();
        assert_full_page(&path, &body);
    }
    // The organizer overview, as its logged-in organizer sees it.
    let org = app.organizer("org@example.org").await;
    let resp = org.get("/organizer").await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_full_page("/organizer", &resp.text().await.unwrap());
    let tt = fixture.ticket_type_id().to_string();
    let resp = post_form(
        &app,
        &format!("/events/{}/orders", fixture.event_id),
        &[
            ("ticket_type_id", tt.as_str()),
            ("quantity", "0"),
            ("email", "ada@example.org"),
            ("idempotency_key", "k"),
        ],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_full_page("refused buy form", &resp.text().await.unwrap());
}

#[sqlx::test]
async fn organizer_event_forms_are_full_pages_with_the_site_layout(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let fixture = owned_published_event(&org, &[TicketSpec::new(10, 4, 4)]).await;
    for path in [
        "/organizer/events/new".to_owned(),
        format!("/organizer/events/{}/edit", fixture.event_id),
    ] {
        let resp = org.get(&path).await;
        assert_eq!(resp.status(), StatusCode::OK, "{path}");
        assert_full_page(&path, &resp.text().await.unwrap());
    }
    let fields = with(&new_event_form("Refused"), "starts_at", "never");
    let resp = org.post_form("/organizer/events", &borrowed(&fields)).await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_full_page("refused organizer form", &resp.text().await.unwrap());
}

// ---------------------------------------------------------------------------
// Static files, headers, health
// ---------------------------------------------------------------------------

#[sqlx::test]
async fn static_assets_are_immutable_and_revalidate_with_their_etag(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    for (file, content_type, needle) in [
        ("style.css", "text/css", "{"),
        ("app.js", "text/javascript", "use strict"),
    ] {
        let resp = get(&app, &format!("/static/{file}")).await;
        assert_eq!(resp.status(), StatusCode::OK, "{file}");
        let headers = resp.headers().clone();
        let cache = headers["cache-control"].to_str().unwrap();
        assert!(cache.contains("immutable"), "{file}: {cache}");
        assert!(cache.contains("max-age=31536000"), "{file}: {cache}");
        assert!(
            headers["content-type"]
                .to_str()
                .unwrap()
                .starts_with(content_type),
            "{file}"
        );
        let etag = headers["etag"].to_str().unwrap().to_owned();
        assert!(
            etag.starts_with('"') && etag.ends_with('"') && etag.len() > 2,
            "{file}: {etag}"
        );
        assert!(resp.text().await.unwrap().contains(needle), "{file}");

        // Pages link the asset with the same hash as the ETag.
        let home = get(&app, "/").await.text().await.unwrap();
        assert!(
            home.contains(&format!("/static/{file}?v={}", etag.trim_matches('"'))),
            "{file}: {home}"
        );

        let resp = app
            .client
            .get(app.url(&format!("/static/{file}")))
            .header("if-none-match", &etag)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::NOT_MODIFIED, "{file}");
        assert_eq!(resp.headers()["etag"].to_str().unwrap(), etag);
        assert!(resp.text().await.unwrap().is_empty());

        let resp = app
            .client
            .get(app.url(&format!("/static/{file}")))
            .header("if-none-match", "\"0000000000000000\"")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "{file}");
    }
}

#[sqlx::test]
async fn unknown_static_asset_is_not_found(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    for path in [
        "/static/nope.css",
        "/static/..%2FCargo.toml",
        "/static/style.css.map",
    ] {
        let resp = get(&app, path).await;
        assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{path}");
        // A miss must never be cached like an asset.
        assert_eq!(resp.headers()["cache-control"], "no-store", "{path}");
    }
}

#[sqlx::test]
async fn responses_carry_security_headers(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let app = TestApp::spawn(pool).await;
    let org = app.organizer("org@example.org").await;
    let mut responses = Vec::new();
    for path in [
        "/".to_owned(),
        format!("/events/{}", fixture.event_id),
        "/organizer".to_owned(),
        "/api/v1/events".to_owned(),
        "/static/style.css".to_owned(),
        "/healthz".to_owned(),
        "/missing".to_owned(),
        "/api/v1/missing".to_owned(),
    ] {
        responses.push((path.clone(), get(&app, &path).await));
    }
    // Organizer pages as their organizer sees them (anonymous: a redirect).
    for path in ["/organizer", "/organizer/events/new", "/organizer/settings"] {
        let resp = org.get(path).await;
        assert_eq!(resp.status(), StatusCode::OK, "{path}");
        responses.push((format!("{path} (logged in)"), resp));
    }
    for (path, resp) in responses {
        let headers = resp.headers();
        let csp = headers
            .get("content-security-policy")
            .unwrap_or_else(|| panic!("{path}: no CSP"))
            .to_str()
            .unwrap();
        assert!(csp.contains("default-src 'self'"), "{path}: {csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(headers["x-frame-options"], "DENY", "{path}");
        assert!(headers.contains_key("x-request-id"), "{path}");
    }
}

#[sqlx::test]
async fn health_check_answers_ok(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let resp = get(&app, "/healthz").await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.text().await.unwrap(), "ok");
}

#[sqlx::test]
async fn events_that_already_started_are_not_listed_for_buyers(pool: PgPool) {
    let upcoming = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    // Fixtures start 30 days after the sale opens: this one started 10 days ago.
    let past_opening = OffsetDateTime::now_utc() - Span::days(40);
    let past = event_with_window(
        &pool,
        past_opening,
        None,
        "published",
        &[TicketSpec::new(10, 4, 4)],
    )
    .await;
    let app = TestApp::spawn(pool.clone()).await;

    let home = get(&app, "/").await.text().await.unwrap();
    assert!(
        home.contains(&format!("/events/{}", upcoming.event_id)),
        "{home}"
    );
    assert!(
        !home.contains(&format!("/events/{}", past.event_id)),
        "{home}"
    );
    let listed: Value = get(&app, "/api/v1/events").await.json().await.unwrap();
    let ids: Vec<&str> = listed["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![upcoming.event_id.to_string()]);
}

#[sqlx::test]
async fn pages_with_order_codes_are_never_stored_by_caches(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let app = TestApp::spawn(pool.clone()).await;
    let order_id = api_buy(&app, fixture.ticket_type_id(), 1, "ada@example.org").await;
    for path in [
        format!("/orders/{order_id}"),
        format!("/api/v1/orders/{order_id}"),
        format!("/events/{}", fixture.event_id),
    ] {
        let resp = get(&app, &path).await;
        assert_eq!(resp.status(), StatusCode::OK, "{path}");
        assert_eq!(resp.headers()["cache-control"], "no-store", "{path}");
    }
    let asset = get(&app, "/static/style.css").await;
    assert!(
        asset.headers()["cache-control"]
            .to_str()
            .unwrap()
            .contains("immutable")
    );
}
