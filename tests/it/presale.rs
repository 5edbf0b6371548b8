//! Issue 13: presale codes, against real Postgres. A code's uses are
//! enforced like stock, in the sale transaction, and come back exactly once
//! with a cancelled or expired order; a hidden ticket type is invisible and
//! unsellable without a code that unlocks it. Every count is read from the
//! tables.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{
    TestApp, TicketSpec, assert_invariants, now, pool, published_event, purchase::purchase_request,
};
use futures::future::join_all;
use reqwest::Method;
use serde_json::{Value, json};
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use stampede::{
    db,
    domain::{CodeInput, ConfirmKey, PresaleCode},
    error::AppError,
    sale::{self, EngineSettings, Purchase, PurchaseRequest, Sales, Strategy},
};
use time::Duration as Span;
use uuid::Uuid;

/// Hide the ticket type and give its event a code for `uses` tickets that
/// unlocks it.
async fn hidden_with_code(
    pool: &PgPool,
    fixture: &common::Fixture,
    tt: Uuid,
    code: &str,
    uses: i64,
) {
    sqlx::query("UPDATE ticket_types SET hidden = true WHERE id = $1")
        .bind(tt)
        .execute(pool)
        .await
        .unwrap();
    let input = CodeInput {
        code: code.into(),
        max_uses: uses.to_string(),
        ticket_type_ids: vec![tt.to_string()],
        ..CodeInput::default()
    };
    db::presale::create(
        pool,
        fixture.organizer_id.into(),
        fixture.event_id.into(),
        &input.parse().unwrap(),
    )
    .await
    .unwrap();
}

fn with_code(mut request: PurchaseRequest, code: &str) -> PurchaseRequest {
    request.presale_code = Some(PresaleCode::parse(code).unwrap());
    request
}

async fn used(pool: &PgPool, code: &str) -> i32 {
    sqlx::query_scalar("SELECT used FROM presale_codes WHERE code = $1")
        .bind(code)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Tickets of live orders bought with the code: what its `used` must say.
async fn sold_with(pool: &PgPool, code: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT coalesce(sum(o.quantity), 0)::int8 FROM orders o
         JOIN presale_codes c ON c.id = o.presale_code_id
         WHERE c.code = $1 AND o.status IN ('held', 'confirmed')",
    )
    .bind(code)
    .fetch_one(pool)
    .await
    .unwrap()
}

async fn ten_uses_against_two_hundred_buyers(pool: &PgPool, strategy: Strategy) {
    let fixture = published_event(
        pool,
        &[TicketSpec::new(100, 1, 1), TicketSpec::new(100, 1, 1)],
    )
    .await;
    let (tt, open_type) = (fixture.ticket_type_ids[0], fixture.ticket_type_ids[1]);
    hidden_with_code(pool, &fixture, tt, "FANS-10", 10).await;
    let sales = Sales::new(pool.clone(), strategy, EngineSettings::default());
    let at = now();

    // Without the code the hidden type is not there; a code that does not
    // unlock a type is refused, naming the field.
    let bare = sales
        .purchase(at, &purchase_request(tt, 1, "nocode@example.org"))
        .await;
    assert!(matches!(bare, Err(AppError::NotFound)), "{bare:?}");
    let wrong = sales
        .purchase(
            at,
            &with_code(
                purchase_request(open_type, 1, "wrong@example.org"),
                "FANS-10",
            ),
        )
        .await;
    assert!(
        matches!(wrong, Err(AppError::Invalid(ref f)) if f.field == "presale_code"),
        "{wrong:?}"
    );
    let unknown = sales
        .purchase(
            at,
            &with_code(purchase_request(tt, 1, "unknown@example.org"), "NOPE-1"),
        )
        .await;
    assert!(matches!(unknown, Err(AppError::Invalid(_))), "{unknown:?}");

    let results = join_all((0..200).map(|i| {
        let sales = sales.clone();
        let request = with_code(
            purchase_request(tt, 1, &format!("fan{i}@example.org")),
            "fans-10",
        );
        async move { sales.purchase(at, &request).await }
    }))
    .await;
    let mut sold = Vec::new();
    for result in results {
        match result {
            Ok(Purchase::Created {
                order,
                cancel_secret,
            }) => sold.push((order, cancel_secret)),
            // Used up: the same answer as an unknown code.
            Err(AppError::Invalid(invalid)) if invalid.field == "presale_code" => {}
            other => panic!("unexpected answer: {other:?}"),
        }
    }
    assert_eq!(sold.len(), 10, "exactly the code's uses are sold");
    assert_eq!(used(pool, "FANS-10").await, 10);
    assert_eq!(sold_with(pool, "FANS-10").await, 10);
    assert_invariants(pool).await;

    // A cancel gives its use back, once; the next fan buys with it.
    let (order, secret) = &sold[0];
    sale::cancel(pool, now(), order.id, Some(secret))
        .await
        .unwrap();
    let again = sale::cancel(pool, now(), order.id, Some(secret)).await;
    assert!(
        matches!(again, Err(AppError::AlreadyCancelled)),
        "{again:?}"
    );
    assert_eq!(used(pool, "FANS-10").await, 9);
    let late = sales
        .purchase(
            now(),
            &with_code(purchase_request(tt, 1, "late@example.org"), "FANS-10"),
        )
        .await;
    assert!(matches!(late, Ok(Purchase::Created { .. })), "{late:?}");
    assert_eq!(used(pool, "FANS-10").await, 10);
    let over = sales
        .purchase(
            now(),
            &with_code(purchase_request(tt, 1, "over@example.org"), "FANS-10"),
        )
        .await;
    assert_eq!(
        over.err().map(|e| e.to_string()),
        Some(AppError::code_not_valid().to_string()),
        "a used-up code answers as an unknown one"
    );
    assert_eq!(sold_with(pool, "FANS-10").await, 10);
    assert_invariants(pool).await;
}

#[sqlx::test]
async fn a_code_with_ten_uses_sells_exactly_ten_tickets_to_two_hundred_buyers_in_the_engine(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 20).await;
    ten_uses_against_two_hundred_buyers(&pool, Strategy::Batch).await;
}

#[sqlx::test]
async fn a_code_with_ten_uses_sells_exactly_ten_tickets_to_two_hundred_buyers_one_by_one(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 20).await;
    ten_uses_against_two_hundred_buyers(&pool, Strategy::ForUpdate).await;
}

#[sqlx::test]
async fn a_held_order_that_expires_gives_its_code_uses_back(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 10).await;
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let tt = fixture.ticket_type_id();
    hidden_with_code(&pool, &fixture, tt, "HELD-2", 2).await;
    sqlx::query("UPDATE events SET hold_seconds = 60 WHERE id = $1")
        .bind(fixture.event_id)
        .execute(&pool)
        .await
        .unwrap();
    let sales = Sales::new(pool.clone(), Strategy::Batch, EngineSettings::default())
        .with_confirm_key(ConfirmKey::random());
    let at = now();
    let held = sales
        .purchase(
            at,
            &with_code(purchase_request(tt, 2, "held@example.org"), "HELD-2"),
        )
        .await
        .unwrap();
    assert_eq!(used(&pool, "HELD-2").await, 2);
    assert_eq!(
        sale::expire_holds(&pool, at + Span::seconds(61))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        sale::expire_holds(&pool, at + Span::seconds(62))
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        used(&pool, "HELD-2").await,
        0,
        "the expired hold's uses came back once"
    );
    assert_eq!(held.order().status.as_str(), "held");
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn a_hidden_ticket_type_is_invisible_without_its_code_on_the_pages_and_in_the_api(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 10).await;
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("presale@example.org").await;
    let fixture = common::organizer::owned_published_event(
        &org,
        &[TicketSpec::new(10, 2, 2), TicketSpec::new(10, 2, 2)],
    )
    .await;
    let hidden = fixture.ticket_type_ids[1];
    // The organizer hides the second type and makes a code for it (API).
    let resp = org
        .api(
            Method::PATCH,
            &format!(
                "/api/v1/organizer/events/{}/ticket-types/{hidden}",
                fixture.event_id
            ),
        )
        .json(&json!({"hidden": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    let resp = org
        .api(
            Method::POST,
            &format!(
                "/api/v1/organizer/events/{}/presale-codes",
                fixture.event_id
            ),
        )
        .json(&json!({"code": "vip-room", "max_uses": 4, "ticket_type_ids": [hidden]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let created: Value = resp.json().await.unwrap();
    assert_eq!(created["codes"][0]["code"], "VIP-ROOM");
    assert_eq!(created["codes"][0]["used"], 0);

    let hidden_name = "General admission 1";
    let page = |path: String| {
        let client = app.client.clone();
        let url = app.url(&path);
        async move { client.get(url).send().await.unwrap().text().await.unwrap() }
    };
    let event_page = page(format!("/events/{}", fixture.event_id)).await;
    assert!(event_page.contains("General admission 0"), "{event_page}");
    assert!(!event_page.contains(hidden_name) && !event_page.contains(&hidden.to_string()));
    for path in [
        format!("/api/v1/events/{}", fixture.event_id),
        "/api/v1/events".to_owned(),
        "/".to_owned(),
    ] {
        let body = page(path.clone()).await;
        assert!(
            !body.contains(hidden_name) && !body.contains(&hidden.to_string()),
            "{path}: {body}"
        );
    }
    // A wrong code unlocks nothing; the right one (any case) shows the type.
    let wrong = page(format!("/events/{}?code=NOT-IT", fixture.event_id)).await;
    assert!(!wrong.contains(hidden_name));
    let unlocked = page(format!("/events/{}?code=vip-room", fixture.event_id)).await;
    assert!(
        unlocked.contains(hidden_name) && unlocked.contains(&hidden.to_string()),
        "{unlocked}"
    );
    assert!(
        unlocked.contains("value=\"vip-room\""),
        "the link fills the code in"
    );

    // Buying it through the API: without the code "not found", with it sold.
    let order = |code: Option<&str>, email: &str| {
        let mut body = json!({
            "ticket_type_id": hidden, "quantity": 2, "email": email,
            "idempotency_key": Uuid::new_v4().to_string(),
        });
        if let Some(code) = code {
            body["presale_code"] = json!(code);
        }
        let client = app.client.clone();
        let url = app.url("/api/v1/orders");
        async move { client.post(url).json(&body).send().await.unwrap() }
    };
    assert_eq!(order(None, "a@example.org").await.status(), 404);
    let bad = order(Some("no spaces allowed"), "a@example.org").await;
    assert_eq!(bad.status(), 422);
    let bad: Value = bad.json().await.unwrap();
    assert_eq!(bad["error"]["field"], "presale_code");
    assert_eq!(order(Some("Vip-Room"), "a@example.org").await.status(), 201);
    assert_eq!(order(Some("VIP-ROOM"), "b@example.org").await.status(), 201);
    // Used up and unknown are one answer: a guesser cannot tell them apart.
    let used_up = order(Some("VIP-ROOM"), "c@example.org").await;
    assert_eq!(used_up.status(), 422);
    let used_up: Value = used_up.json().await.unwrap();
    let unknown = order(Some("NO-SUCH-CODE"), "c@example.org").await;
    assert_eq!(unknown.status(), 422);
    let unknown: Value = unknown.json().await.unwrap();
    assert_eq!(used_up, unknown);
    assert_eq!(used_up["error"]["field"], "presale_code");
    assert_eq!(used(&pool, "VIP-ROOM").await, 4);
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn organizers_create_codes_on_the_page_and_export_them_and_bad_input_writes_nothing(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 10).await;
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("codes@example.org").await;
    let fixture =
        common::organizer::owned_published_event(&org, &[TicketSpec::new(10, 2, 2)]).await;
    let tt = fixture.ticket_type_id().to_string();
    let path = format!("/organizer/events/{}/codes", fixture.event_id);
    let count = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM presale_codes")
            .fetch_one(&pool)
            .await
            .unwrap()
    };

    // Bad input: 422, the form filled in, the field named, nothing written.
    let resp = org
        .post_form(
            &path,
            &[("count", "5"), ("max_uses", "0"), ("ticket_type_ids", &tt)],
        )
        .await;
    assert_eq!(resp.status(), 422);
    let html = resp.text().await.unwrap();
    assert!(
        html.contains("id=\"max_uses\"") && html.contains("aria-invalid=\"true\""),
        "{html}"
    );
    assert!(
        html.contains("value=\"5\""),
        "the form comes back filled in"
    );
    let resp = org
        .post_form(&path, &[("count", "5"), ("max_uses", "3")])
        .await;
    assert_eq!(resp.status(), 422, "no ticket type chosen");
    assert_eq!(count().await, 0);

    // A batch of five generated codes.
    let resp = org
        .post_form(
            &path,
            &[("count", "5"), ("max_uses", "3"), ("ticket_type_ids", &tt)],
        )
        .await;
    assert_eq!(resp.status(), 303);
    assert_eq!(count().await, 5);
    let page = org.get(&path).await.text().await.unwrap();
    assert!(
        page.contains("5 codes created") || page.contains("0 of 3"),
        "{page}"
    );
    // One of their own, then the same again: refused on `code`.
    let resp = org
        .post_form(
            &path,
            &[
                ("code", "friends"),
                ("max_uses", "2"),
                ("ticket_type_ids", &tt),
            ],
        )
        .await;
    assert_eq!(resp.status(), 303);
    let resp = org
        .post_form(
            &path,
            &[
                ("code", "FRIENDS"),
                ("max_uses", "2"),
                ("ticket_type_ids", &tt),
            ],
        )
        .await;
    assert_eq!(resp.status(), 422);
    assert_eq!(count().await, 6);

    let csv = org.get(&format!("{path}.csv")).await;
    assert_eq!(csv.status(), 200);
    assert!(
        csv.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv")
    );
    let csv = csv.text().await.unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "code,max_uses,used,valid_from,valid_until,ticket_types"
    );
    assert_eq!(lines.len(), 7);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("FRIENDS,2,0,,,General admission 0")),
        "{csv}"
    );

    // The API lists the same six; another organizer sees none of it.
    let listed: Value = org
        .api(
            Method::GET,
            &format!(
                "/api/v1/organizer/events/{}/presale-codes",
                fixture.event_id
            ),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["codes"].as_array().unwrap().len(), 6);
    let other = app.organizer("other@example.org").await;
    assert_eq!(other.get(&path).await.status(), 404);
    assert_eq!(other.get(&format!("{path}.csv")).await.status(), 404);
    let resp = other
        .post_form(
            &path,
            &[
                ("code", "STOLEN"),
                ("max_uses", "2"),
                ("ticket_type_ids", &tt),
            ],
        )
        .await;
    assert_eq!(resp.status(), 404);
    let resp = other
        .api(
            Method::POST,
            &format!(
                "/api/v1/organizer/events/{}/presale-codes",
                fixture.event_id
            ),
        )
        .json(&json!({"code": "STOLEN", "max_uses": 2, "ticket_type_ids": [tt]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    assert_eq!(count().await, 6);
}
