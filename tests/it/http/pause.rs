//! Pausing one ticket type's sale through the organizer API: purchases of
//! it are refused and write nothing, the other types sell on, resuming sells
//! again, and a cancelled event's types cannot be resumed.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::{
    common::{organizer::*, *},
    http::support::*,
};

async fn post(org: &Organizer, path: &str) -> reqwest::Response {
    org.api(Method::POST, path).send().await.unwrap()
}

async fn buy(app: &TestApp, ticket_type_id: uuid::Uuid, email: &str) -> reqwest::Response {
    app.client
        .post(app.url("/api/v1/orders"))
        .json(&json!({
            "ticket_type_id": ticket_type_id, "quantity": 1, "email": email,
            "idempotency_key": format!("pause-{}-0123456789", email.replace(['@', '.'], "-")),
        }))
        .send()
        .await
        .unwrap()
}

#[sqlx::test]
async fn a_paused_ticket_type_refuses_purchases_until_it_is_resumed(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("pauser@example.org").await;
    let fixture = owned_published_event(
        &org,
        &[TicketSpec::new(10, 4, 4), TicketSpec::new(10, 4, 4)],
    )
    .await;
    let [paused, other] = [fixture.ticket_type_ids[0], fixture.ticket_type_ids[1]];
    let path = format!(
        "/api/v1/organizer/events/{}/ticket-types/{paused}",
        fixture.event_id
    );
    api_buy(&app, paused, 1, "early@example.org").await;

    for _ in 0..2 {
        let resp = post(&org, &format!("{path}/pause")).await;
        assert_eq!(resp.status(), StatusCode::OK);
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["halted"], true, "{body}");
        assert_eq!(body["remaining"], 9, "{body}");
    }
    let orders = count(&pool, "SELECT count(*) FROM orders").await;
    let refused = buy(&app, paused, "late@example.org").await;
    assert_api_error(refused, StatusCode::FORBIDDEN, "sale_closed", None).await;
    assert_eq!(count(&pool, "SELECT count(*) FROM orders").await, orders);
    assert_eq!(remaining(&pool, paused).await, 9);
    // The event's other ticket type sells on; the early order stays.
    assert_eq!(buy(&app, other, "other@example.org").await.status(), 201);
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM orders WHERE status = 'confirmed'"
        )
        .await,
        orders + 1
    );

    let resp = post(&org, &format!("{path}/resume")).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["halted"], false, "{body}");
    assert_eq!(buy(&app, paused, "late@example.org").await.status(), 201);
    assert_eq!(remaining(&pool, paused).await, 8);
    assert_invariants(&pool).await;

    // Once the event is cancelled, its sale cannot be resumed.
    let cancel = post(
        &org,
        &format!("/api/v1/organizer/events/{}/cancel", fixture.event_id),
    )
    .await;
    assert!(cancel.status().is_success(), "{}", cancel.status());
    let resp = post(&org, &format!("{path}/resume")).await;
    assert_api_error(resp, StatusCode::CONFLICT, "event_cancelled", None).await;
    let halted: bool = sqlx::query_scalar("SELECT sales_halted FROM ticket_types WHERE id = $1")
        .bind(paused)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(halted);
}

#[sqlx::test]
async fn another_organizer_cannot_pause_or_resume(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let owner = app.organizer("owner@example.org").await;
    let other = app.organizer("other@example.org").await;
    let fixture = owned_published_event(&owner, &[TicketSpec::new(10, 4, 4)]).await;
    let path = format!(
        "/api/v1/organizer/events/{}/ticket-types/{}",
        fixture.event_id,
        fixture.ticket_type_id()
    );
    for action in ["pause", "resume"] {
        let resp = post(&other, &format!("{path}/{action}")).await;
        assert_api_error(resp, StatusCode::NOT_FOUND, "not_found", None).await;
    }
    let halted: bool = sqlx::query_scalar("SELECT sales_halted FROM ticket_types WHERE id = $1")
        .bind(fixture.ticket_type_id())
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(!halted);
}
