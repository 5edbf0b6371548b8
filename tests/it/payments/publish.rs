//! Without Stripe, an event whose tickets have a price that Stripe should
//! take cannot be published; free tickets, and prices the organizer
//! collects, can.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::common::{TestApp, organizer::api_create_event};

fn event(title: &str, price_minor: i64, payment: Option<&str>) -> Value {
    let mut body = json!({
        "title": title,
        "venue": "Hall",
        "starts_at": "2030-03-01T19:30:00Z",
        "sale_opens_at": "2020-01-01T10:00:00Z",
        "status": "published",
        "ticket_types": [{"name": "Standing", "price_minor": price_minor, "currency": "EUR",
                          "capacity": 10}],
    });
    if let Some(payment) = payment {
        body["payment"] = json!(payment);
    }
    body
}

#[sqlx::test]
async fn a_paid_event_is_not_published_without_stripe_and_nothing_is_written(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("paid@example.org").await;
    for payment in [None, Some("stripe")] {
        let resp = api_create_event(&org, &event("Paid", 2500, payment)).await;
        assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["field"], "payment", "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("Stripe"),
            "{body}"
        );
    }
    let events: i64 = sqlx::query_scalar("SELECT count(*) FROM events")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(events, 0);
    // A way to pay that does not exist is named too.
    let resp = api_create_event(&org, &event("Paid", 2500, Some("cash"))).await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    // Free tickets, and prices collected by the organizer, publish.
    for (price, payment) in [(0, None), (2500, Some("offline"))] {
        let resp = api_create_event(&org, &event("Fine", price, payment)).await;
        assert_eq!(resp.status(), StatusCode::CREATED);
    }
    // A draft may wait for Stripe; publishing it may not.
    let mut draft = event("Later", 2500, None);
    draft["status"] = json!("draft");
    let resp = api_create_event(&org, &draft).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let id = resp.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let publish = org
        .api(
            Method::POST,
            &format!("/api/v1/organizer/events/{id}/publish"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(publish.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let status: String = sqlx::query_scalar("SELECT status FROM events WHERE id = $1::uuid")
        .bind(&id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(status, "draft");
}
