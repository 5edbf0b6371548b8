//! Under overload Stampede answers 503 with Retry-After at once instead of
//! queueing without bound.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::{net::SocketAddr, time::Duration};

use common::{TicketSpec, csrf_cookie, form_body, published_event, serve};
use reqwest::Response;
use serde_json::{Value, json};
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use stampede::{AppState, web::Limits};
use uuid::Uuid;

/// A pool of a single connection that waits at most `wait` for it.
async fn one_connection_pool(connect: PgConnectOptions, wait: Duration) -> PgPool {
    PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(wait)
        .connect_with(connect)
        .await
        .unwrap()
}

/// One ticket for ada@example.org through the JSON API, with a fresh key.
async fn buy_one(client: reqwest::Client, addr: SocketAddr, ticket_type_id: Uuid) -> Response {
    client
        .post(format!("http://{addr}/api/v1/orders"))
        .json(&json!({
            "ticket_type_id": ticket_type_id,
            "quantity": 1,
            "email": "ada@example.org",
            "idempotency_key": Uuid::new_v4().to_string(),
        }))
        .send()
        .await
        .unwrap()
}

#[sqlx::test]
async fn an_exhausted_database_pool_is_answered_503_with_retry_after(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let setup = common::pool(connect.clone(), 2).await;
    let fixture = published_event(&setup, &[TicketSpec::new(10, 2, 2)]).await;
    // A pool of one connection that waits at most 200 ms for it.
    let pool = one_connection_pool(connect, Duration::from_millis(200)).await;
    let addr = serve(AppState::new(pool.clone())).await;
    let client = reqwest::Client::new();

    // Hold the only connection, as a stalled transaction would.
    let held = pool.acquire().await.unwrap();
    let page = client
        .get(format!("http://{addr}/events/{}", fixture.event_id))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 503);
    assert_eq!(page.headers()["retry-after"], "1");
    let order = buy_one(client.clone(), addr, fixture.ticket_type_id()).await;
    assert_eq!(order.status(), 503);
    assert_eq!(order.headers()["retry-after"], "1");
    let body: Value = order.json().await.unwrap();
    assert_eq!(body["error"]["code"], "overloaded");
    drop(held);

    // With the connection back, the same purchase goes through.
    let order = buy_one(client.clone(), addr, fixture.ticket_type_id()).await;
    assert_eq!(order.status(), 201);
    assert_eq!(common::order_count(&setup).await, 1);
    common::assert_invariants(&setup).await;
    pool.close().await;
    setup.close().await;
}

#[sqlx::test]
async fn requests_beyond_the_in_flight_limit_are_shed_at_once(pool: PgPool) {
    // One request at a time: the first holds its slot while it waits for the
    // only database connection, which the test holds.
    let limited =
        one_connection_pool((*pool.connect_options()).clone(), Duration::from_secs(10)).await;
    let limits = Limits {
        max_in_flight: 1,
        ..Limits::default()
    };
    let addr = serve(AppState::new(limited.clone()).with_limits(limits)).await;
    let client = reqwest::Client::new();
    let held = limited.acquire().await.unwrap();

    let first = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .get(format!("http://{addr}/"))
                .send()
                .await
                .unwrap()
                .status()
        })
    };
    // Probe with a static file, which needs no database and so never takes
    // the slot for long: it is shed (503) once the first request holds it.
    let mut shed = None;
    for _ in 0..500 {
        let response = client
            .get(format!("http://{addr}/static/style.css"))
            .send()
            .await
            .unwrap();
        if response.status() == 503 {
            shed = Some(response);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let shed = shed.expect("a second request is shed while the first holds the only slot");
    assert_eq!(shed.headers()["retry-after"], "1");
    // While the slot is held every request is shed; the API's in its JSON
    // error shape, like every other API error.
    let api = client
        .get(format!("http://{addr}/api/v1/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), 503);
    assert_eq!(api.headers()["retry-after"], "1");
    assert!(
        api.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let body: Value = api.json().await.unwrap();
    assert_eq!(body["error"]["code"], "overloaded", "{body}");
    assert!(body["error"]["field"].is_null(), "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{body}"
    );

    drop(held);
    assert_eq!(
        first.await.unwrap(),
        200,
        "the first request completes once the database is free"
    );
    limited.close().await;
}

/// Send `request` until it is shed (503), for at most five seconds.
async fn until_shed(request: impl Fn() -> reqwest::RequestBuilder) -> Response {
    for _ in 0..500 {
        let response = request().send().await.unwrap();
        if response.status() == 503 {
            return response;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never shed");
}

#[sqlx::test]
async fn purchases_and_everything_else_have_budgets_of_their_own(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let tt = fixture.ticket_type_id();
    // One request of each kind at a time; each waits for the only database
    // connection, which the test holds.
    let limited =
        one_connection_pool((*pool.connect_options()).clone(), Duration::from_secs(10)).await;
    let limits = Limits {
        max_in_flight: 1,
        max_purchases_in_flight: 1,
        ..Limits::default()
    };
    let addr = serve(AppState::new(limited.clone()).with_limits(limits)).await;
    let client = reqwest::Client::new();
    let url = move |path: &str| format!("http://{addr}{path}");
    let held = limited.acquire().await.unwrap();

    // A page waits for the database, holding the budget for everything but
    // purchases: the next such request is shed at once, as an HTML page.
    let event_page = url(&format!("/events/{}", fixture.event_id));
    let page = tokio::spawn(client.get(event_page).send());
    let shed = until_shed(|| client.get(url("/static/style.css"))).await;
    assert_eq!(shed.headers()["retry-after"], "1");
    assert!(shed.text().await.unwrap().contains("<html"));

    // A purchase is still let in, and waits for the database too; then the
    // purchase budget is taken, and the next purchase is shed in the API's
    // JSON shape. (The probe is malformed, so that while the budget is
    // free it is refused at once instead of waiting.)
    let purchase = tokio::spawn(buy_one(client.clone(), addr, tt));
    let shed = until_shed(|| client.post(url("/api/v1/orders")).json(&json!({}))).await;
    assert_eq!(shed.headers()["retry-after"], "1");
    let body: Value = shed.json().await.unwrap();
    assert_eq!(body["error"]["code"], "overloaded");

    // Liveness answers with both budgets taken.
    let health = client.get(url("/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);

    drop(held);
    assert_eq!(purchase.await.unwrap().status(), 201);
    assert_eq!(page.await.unwrap().unwrap().status(), 200);
    limited.close().await;
}

/// The fault of issue 7: the hot row locked for longer than the request
/// timeout. The purchase waiting on it is answered 503 with `Retry-After`
/// (the JSON `overloaded` error) when the timeout passes, writes nothing,
/// and leaves nothing behind: once the row is free the next purchase goes
/// through.
#[sqlx::test]
async fn a_purchase_past_the_request_timeout_is_answered_503_and_writes_nothing(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let control = common::pool(connect.clone(), 4).await;
    let fixture = published_event(&control, &[TicketSpec::new(10, 2, 2)]).await;
    let tt = fixture.ticket_type_id();
    let pool = common::pool(connect, 4).await;
    let limits = Limits {
        request_timeout: Duration::from_millis(500),
        ..Limits::default()
    };
    let addr = serve(AppState::new(pool.clone()).with_limits(limits)).await;
    let client = reqwest::Client::new();

    let hold = common::locks::hold_ticket_type(&control, tt).await;
    let timed_out = buy_one(client.clone(), addr, tt).await;
    assert_eq!(timed_out.status(), 503);
    assert_eq!(timed_out.headers()["retry-after"], "1");
    assert!(
        timed_out.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let body: Value = timed_out.json().await.unwrap();
    assert_eq!(body["error"]["code"], "overloaded", "{body}");
    assert!(body["error"]["field"].is_null(), "{body}");
    hold.tx.commit().await.unwrap();

    // The abandoned transaction does not keep the row: a purchase goes
    // through within the timeout, and it is the only order.
    let next = buy_one(client.clone(), addr, tt).await;
    assert_eq!(next.status(), 201, "{:?}", next.text().await);
    assert_eq!(common::order_count(&control).await, 1);
    assert_eq!(common::assert_invariants(&control).await, vec![(tt, 1)]);
    pool.close().await;
    control.close().await;
}

/// Log-ins wait for one of the few password-hashing slots; one that waits
/// too long (every slot is taken here, as a crowd of log-ins would) is
/// answered 503 with `Retry-After`, on the page, instead of queueing.
#[sqlx::test]
async fn a_log_in_that_waits_too_long_for_hashing_is_answered_503_with_retry_after(pool: PgPool) {
    // Far beyond the hashing wait: a 503 here is the hashing queue's.
    let limits = Limits {
        request_timeout: Duration::from_secs(120),
        ..Limits::default()
    };
    let addr = serve(AppState::new(pool.clone()).with_limits(limits)).await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let log_in = || {
        client
            .post(format!("http://{addr}/login"))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("cookie", csrf_cookie())
            .body(form_body(&[
                ("email", "ada@example.org"),
                ("password", "a long passphrase"),
            ]))
            .send()
    };
    let slots = stampede::auth::occupy_hashing().await.unwrap();
    let busy = log_in().await.unwrap();
    assert_eq!(busy.status(), 503);
    assert_eq!(busy.headers()["retry-after"], "1");
    let page = busy.text().await.unwrap();
    assert!(page.contains("<html"), "{page}");
    assert!(page.contains("very busy"), "{page}");
    drop(slots);
    // With the slots free, the same log-in is checked: no such account.
    assert_eq!(log_in().await.unwrap().status(), 401);
}
