//! Issue 7, item 4 over HTTP: invisible characters in an email are refused,
//! folded spellings share a limit, and the optional per-event limit is set by
//! organizers (form and API) and enforced on purchases.

use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::{
    common::{forms::*, organizer::*, *},
    http::support::*,
};

fn key() -> String {
    Uuid::new_v4().to_string()
}

#[sqlx::test]
async fn an_email_with_an_invisible_character_is_a_422_naming_email(pool: PgPool) {
    let (app, fixture) = app_with_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let tt = fixture.ticket_type_id();
    for email in [
        "ad\u{200B}a@example.org",
        "ad\u{00AD}a@example.org",
        "ada\u{200D}@example.org",
        "\u{202E}ada@example.org",
        "ada@exam\u{2060}ple.org",
    ] {
        let resp = post_json(&app, "/api/v1/orders", &order_json(tt, 1, email, &key())).await;
        let body = assert_invalid(resp, "email").await;
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("invisible"),
            "{body}"
        );
        let resp = buy_on_page(&app, &fixture, "1", email, &key()).await;
        assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
        let page = resp.text().await.unwrap();
        assert!(page.contains("invisible character"), "{page}");
    }
    assert_eq!(order_count(&pool).await, 0);
}

#[sqlx::test]
async fn plus_tags_and_gmail_dots_do_not_make_new_buyers(pool: PgPool) {
    let (app, fixture) = app_with_event(&pool, &[TicketSpec::new(10, 1, 2)]).await;
    let tt = fixture.ticket_type_id();
    for email in ["jane.doe@gmail.com", "janedoe+2@googlemail.com"] {
        let resp = post_json(&app, "/api/v1/orders", &order_json(tt, 1, email, &key())).await;
        assert_eq!(resp.status(), StatusCode::CREATED);
    }
    for email in [
        "j.anedoe+3@gmail.com",
        "JANEDOE@gmail.com",
        "ｊａｎｅｄｏｅ@gmail.com",
    ] {
        let resp = post_json(&app, "/api/v1/orders", &order_json(tt, 1, email, &key())).await;
        assert_api_error(
            resp,
            StatusCode::CONFLICT,
            "limit_exceeded",
            Some("quantity"),
        )
        .await;
    }
    // The orders keep the emails as given.
    let emails: Vec<String> = sqlx::query_scalar("SELECT email FROM orders ORDER BY created_at")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(emails, ["jane.doe@gmail.com", "janedoe+2@googlemail.com"]);
    assert_books(&pool, tt, 2, 8).await;
}

#[sqlx::test]
async fn an_event_limit_set_through_the_api_holds_across_ticket_types(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let tt = |name: &str| {
        json!({"name": name, "price_minor": 100, "currency": "EUR", "capacity": 10,
               "max_per_order": 2, "max_per_buyer": 2})
    };
    let body = json!({
        "title": "Night", "venue": "Hall", "status": "published", "max_per_buyer": 3,
        "payment": "offline",
        "starts_at": "2030-03-01T19:30:00Z", "sale_opens_at": "2020-01-01T10:00:00Z",
        "ticket_types": [tt("Standing"), tt("Seated")],
    });
    let resp = api_create_event(&org, &body).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let created: Value = resp.json().await.unwrap();
    assert_eq!(created["max_per_buyer"], 3);
    let id = |v: &Value| Uuid::parse_str(v.as_str().unwrap()).unwrap();
    let standing = id(&created["ticket_types"][0]["id"]);
    let seated = id(&created["ticket_types"][1]["id"]);

    let buy = |tt: Uuid, n: i64, email: &'static str| {
        let app = &app;
        async move { post_json(app, "/api/v1/orders", &order_json(tt, n, email, &key())).await }
    };
    assert_eq!(
        buy(standing, 2, "ada@example.org").await.status(),
        StatusCode::CREATED
    );
    let resp = buy(seated, 2, "ada+x@example.org").await;
    let err = assert_api_error(
        resp,
        StatusCode::CONFLICT,
        "limit_exceeded",
        Some("quantity"),
    )
    .await;
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("for this event"),
        "{err}"
    );
    assert_eq!(
        buy(seated, 1, "ADA@example.org").await.status(),
        StatusCode::CREATED
    );
    let resp = buy(seated, 1, "ada@example.org").await;
    assert_api_error(
        resp,
        StatusCode::CONFLICT,
        "limit_exceeded",
        Some("quantity"),
    )
    .await;
    assert_eq!(
        buy(seated, 2, "bob@example.org").await.status(),
        StatusCode::CREATED
    );
    assert_eq!(order_count(&pool).await, 3);

    // Zero or a negative limit is invalid, naming the field; null is no limit.
    for bad in [json!(0), json!(-1), json!("x")] {
        let mut body = body.clone();
        body["max_per_buyer"] = bad;
        let resp = api_create_event(&org, &body).await;
        assert_eq!(resp.status().as_u16() / 100, 4);
        if resp.status() == StatusCode::UNPROCESSABLE_ENTITY {
            let got: Value = resp.json().await.unwrap();
            assert_eq!(got["error"]["field"], "max_per_buyer", "{got}");
        }
    }
    let mut open = body.clone();
    open["max_per_buyer"] = Value::Null;
    let resp = api_create_event(&org, &open).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    assert!(resp.json::<Value>().await.unwrap()["max_per_buyer"].is_null());
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn the_event_form_sets_and_checks_the_event_limit(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let fields = with(&new_event_form("Form concert"), "max_per_buyer", "0");
    let resp = org.post_form("/organizer/events", &borrowed(&fields)).await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body = resp.text().await.unwrap();
    assert!(body.contains("name=\"max_per_buyer\""), "{body}");
    assert!(body.contains("value=\"0\""), "{body}");
    assert_eq!(event_count(&pool).await, 0);

    let fields = with(&new_event_form("Form concert"), "max_per_buyer", "5");
    let resp = org.post_form("/organizer/events", &borrowed(&fields)).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let limit: Option<i32> = sqlx::query_scalar("SELECT max_per_buyer FROM events")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(limit, Some(5));
}
