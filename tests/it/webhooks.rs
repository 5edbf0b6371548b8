//! Issue 10's webhooks, against real Postgres and real HTTP: receivers are
//! small axum servers on 127.0.0.1:0 inside each test, the worker runs as
//! `stampede serve` runs it (with the retry base shrunk to milliseconds),
//! and signatures are checked here with a second implementation of the
//! Standard Webhooks scheme, written from the spec, not the app's.
//!
//! "Nothing more arrives" is made certain without timing: the outbox row
//! of the last change is seen fanned out, and every delivery is finished,
//! before the receivers' logs are read.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::{
    collections::VecDeque,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{Router, body::Bytes, extract::State, http::HeaderMap, routing::post};
use base64::{Engine, engine::general_purpose::STANDARD};
use common::{Organizer, TestApp, TicketSpec, api_buy, now, organizer::owned_published_event};
use hmac::{Hmac, Mac};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::Sha256;
use sqlx::PgPool;
use stampede::{
    AppState,
    clock::ManualClock,
    domain::RetrySchedule,
    webhooks::{self, WebhookSettings},
};
use tokio::{sync::mpsc, task::JoinHandle};
use uuid::Uuid;

/// One request a receiver got.
#[derive(Debug, Clone)]
struct Received {
    id: String,
    timestamp: String,
    signature: String,
    body: Bytes,
}

impl Received {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

#[derive(Clone)]
struct Script {
    /// Statuses to answer, in order; 200 once they run out.
    answers: Arc<Mutex<VecDeque<u16>>>,
    log: mpsc::UnboundedSender<Received>,
}

/// A receiver on a loopback port answering `answers` in turn, then 200.
async fn receiver(answers: &[u16]) -> (SocketAddr, mpsc::UnboundedReceiver<Received>) {
    async fn hook(
        State(script): State<Script>,
        headers: HeaderMap,
        body: Bytes,
    ) -> (StatusCode, &'static str) {
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        let _ = script.log.send(Received {
            id: header("webhook-id"),
            timestamp: header("webhook-timestamp"),
            signature: header("webhook-signature"),
            body,
        });
        let status = script.answers.lock().unwrap().pop_front().unwrap_or(200);
        // Markup and a NUL: the log must store and show it as text.
        (StatusCode::from_u16(status).unwrap(), "<b>nope</b>\0!")
    }
    let (log, rx) = mpsc::unbounded_channel();
    let script = Script {
        answers: Arc::new(Mutex::new(answers.iter().copied().collect())),
        log,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new().route("/hook", post(hook)).with_state(script);
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, rx)
}

/// The next request, or a panic if none comes within a minute (a guard
/// against hanging, not a timing assertion).
async fn next(rx: &mut mpsc::UnboundedReceiver<Received>) -> Received {
    tokio::time::timeout(Duration::from_secs(60), rx.recv())
        .await
        .expect("the receiver got nothing within a minute")
        .unwrap()
}

/// Standard Webhooks verification, from the spec: HMAC-SHA256 keyed with
/// the base64 after `whsec_`, over `id.timestamp.body`, compared with each
/// space-separated `v1,` signature of the header.
fn verifies(secret: &str, received: &Received) -> bool {
    let key = STANDARD
        .decode(secret.strip_prefix("whsec_").unwrap())
        .unwrap();
    let mut signed = Vec::new();
    signed.extend_from_slice(received.id.as_bytes());
    signed.push(b'.');
    signed.extend_from_slice(received.timestamp.as_bytes());
    signed.push(b'.');
    signed.extend_from_slice(&received.body);
    let mut mac = <Hmac<Sha256>>::new_from_slice(&key).unwrap();
    mac.update(&signed);
    let expected = STANDARD.encode(mac.finalize().into_bytes());
    received
        .signature
        .split(' ')
        .filter_map(|sig| sig.strip_prefix("v1,"))
        .any(|sig| sig == expected)
}

/// The app, taking loopback webhook URLs or not.
async fn app(pool: &PgPool, allow_private: bool) -> TestApp {
    let clock = ManualClock::new(now());
    let state = AppState::new(pool.clone())
        .with_clock(clock.clone())
        .with_list_cache_ttl(Duration::ZERO)
        .with_webhooks_allow_private(allow_private);
    TestApp::spawn_state(pool.clone(), clock, state).await
}

/// The worker with the retry base at 5 ms: retries after at most 5 ms,
/// 300 ms, 1.8 s, ...
fn worker(pool: &PgPool, allow_private: bool) -> JoinHandle<()> {
    webhooks::spawn(
        pool.clone(),
        WebhookSettings {
            allow_private,
            schedule: RetrySchedule {
                base: Duration::from_millis(5),
            },
            poll: Duration::from_millis(20),
            ..WebhookSettings::default()
        },
    )
    .unwrap()
}

/// Register an endpoint through the API; returns (id, secret).
async fn register(org: &Organizer, url: &str, types: &[&str]) -> (Uuid, String) {
    let resp = org
        .api(Method::POST, "/api/v1/organizer/webhooks")
        .json(&json!({ "url": url, "event_types": types, "description": "test receiver" }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let body: Value = resp.json().await.unwrap();
    let secret = body["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_"), "{body}");
    (
        Uuid::parse_str(body["id"].as_str().unwrap()).unwrap(),
        secret,
    )
}

/// The outbox message id of an order's `order.created`.
async fn created_message(pool: &PgPool, order_id: Uuid) -> Uuid {
    sqlx::query_scalar("SELECT id FROM outbox WHERE order_id = $1 AND kind = 'order.created'")
        .bind(order_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Wait until `sql` (one bool) is true; bounded, polled.
async fn until(pool: &PgPool, sql: &str, bind: Uuid) {
    for _ in 0..1200 {
        let done: bool = sqlx::query_scalar(sql)
            .bind(bind)
            .fetch_one(pool)
            .await
            .unwrap();
        if done {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never became true: {sql}");
}

/// Wait until every outbox row is fanned out and no delivery of the
/// endpoint `endpoint` is pending.
async fn settled(pool: &PgPool, endpoint: Uuid) {
    until(
        pool,
        "SELECT NOT EXISTS (SELECT 1 FROM outbox_behind('webhooks'))
            AND NOT EXISTS (SELECT 1 FROM webhook_deliveries
                            WHERE endpoint_id = $1 AND status = 'pending')",
        endpoint,
    )
    .await;
}

#[sqlx::test]
async fn a_failing_receiver_is_retried_on_the_schedule_with_one_id_and_valid_signatures(
    pool: PgPool,
) {
    let app = app(&pool, true).await;
    let org = app.organizer("retry@example.com").await;
    let (addr, mut rx) = receiver(&[500, 503, 500]).await;
    let (endpoint, secret) =
        register(&org, &format!("http://{addr}/hook"), &["order.created"]).await;
    let event = owned_published_event(&org, &[TicketSpec::new(10, 2, 2)]).await;
    let worker = worker(&pool, true);
    let order = api_buy(&app, event.ticket_type_id(), 1, "buyer@example.com").await;
    let message = created_message(&pool, order).await;

    let mut got = Vec::new();
    for _ in 0..4 {
        got.push(next(&mut rx).await);
    }
    until(
        &pool,
        "SELECT status = 'succeeded' FROM webhook_deliveries WHERE endpoint_id = $1",
        endpoint,
    )
    .await;
    worker.abort();

    for received in &got {
        assert_eq!(
            received.id,
            message.to_string(),
            "same webhook-id every time"
        );
        assert!(verifies(&secret, received), "signature of {received:?}");
        let body = received.json();
        assert_eq!(body["type"], "order.created");
        assert_eq!(body["id"], message.to_string());
        assert_eq!(body["data"]["order_id"], order.to_string());
        assert_eq!(body["event_id"], event.event_id.to_string());
        // Ids and state, never a secret.
        let text = String::from_utf8_lossy(&received.body);
        assert!(
            !text.contains("cancel_secret") && !text.contains("whsec_"),
            "{text}"
        );
    }
    // The same message, signed again: a wrong secret does not verify.
    assert!(!verifies("whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", &got[0]));

    // The log: four attempts, three failures then success; the delay
    // chosen after failure n lies in the schedule's step n (5 ms base:
    // [0, 5], [5, 300], [300, 1800] ms), so they grow; the next attempt
    // came no sooner than its delay.
    let attempts: Vec<(Option<i32>, Option<i64>, time::OffsetDateTime)> = sqlx::query_as(
        "SELECT a.status_code, a.retry_in_ms, a.attempted_at FROM webhook_attempts a
         JOIN webhook_deliveries d ON d.id = a.delivery_id
         WHERE d.endpoint_id = $1 ORDER BY a.id",
    )
    .bind(endpoint)
    .fetch_all(&pool)
    .await
    .unwrap();
    let codes: Vec<Option<i32>> = attempts.iter().map(|a| a.0).collect();
    assert_eq!(codes, [Some(500), Some(503), Some(500), Some(200)]);
    let delays: Vec<i64> = attempts[..3].iter().map(|a| a.1.unwrap()).collect();
    assert!(attempts[3].1.is_none());
    for (delay, (low, high)) in delays.iter().zip([(0, 5), (5, 300), (300, 1800)]) {
        assert!((low..=high).contains(delay), "{delays:?}");
    }
    assert!(delays.windows(2).all(|w| w[0] <= w[1]), "{delays:?}");
    for (i, delay) in delays.iter().enumerate() {
        let gap = attempts[i + 1].2 - attempts[i].2;
        assert!(
            gap.whole_milliseconds() + 1 >= i128::from(*delay),
            "attempt {} came {gap} after its predecessor, before its delay {delay} ms",
            i + 2
        );
    }
    let endpoint_row: (bool, i64) = sqlx::query_as(
        "SELECT enabled, (SELECT attempts FROM webhook_deliveries WHERE endpoint_id = $1)::int8
         FROM webhook_endpoints WHERE id = $1",
    )
    .bind(endpoint)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(endpoint_row, (true, 4));

    // /metrics: the failed attempts, counted for this endpoint; the depth.
    let metrics = app
        .client
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let failures = format!("stampede_webhook_failures_total{{endpoint=\"{endpoint}\"}} 3");
    assert!(metrics.contains(&failures), "{metrics}");
    assert!(
        metrics.contains("stampede_webhook_queue_depth 0"),
        "{metrics}"
    );
}

#[sqlx::test]
async fn failing_for_the_whole_window_fails_the_delivery_and_disables_the_endpoint(pool: PgPool) {
    let app = app(&pool, true).await;
    let org = app.organizer("down@example.com").await;
    let (addr, mut rx) = receiver(&[500; 1000]).await;
    let (endpoint, _) = register(&org, &format!("http://{addr}/hook"), &["order.created"]).await;
    let event = owned_published_event(&org, &[TicketSpec::new(10, 2, 2)]).await;
    let worker = worker(&pool, true);
    api_buy(&app, event.ticket_type_id(), 1, "buyer@example.com").await;
    next(&mut rx).await;
    // The first attempt "was" longer ago than the window (51,840 times the
    // 5 ms base, about 4.3 minutes): the next failure is the last.
    sqlx::query(
        "UPDATE webhook_deliveries SET first_attempt_at = now() - interval '1 hour'
         WHERE endpoint_id = $1",
    )
    .bind(endpoint)
    .execute(&pool)
    .await
    .unwrap();
    until(
        &pool,
        "SELECT status = 'failed' FROM webhook_deliveries WHERE endpoint_id = $1",
        endpoint,
    )
    .await;
    worker.abort();
    let (enabled, reason): (bool, Option<String>) =
        sqlx::query_as("SELECT enabled, disabled_reason FROM webhook_endpoints WHERE id = $1")
            .bind(endpoint)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(!enabled);
    let reason = reason.unwrap();
    assert!(reason.starts_with("Every attempt failed from"), "{reason}");
    let last_retry: Option<i64> = sqlx::query_scalar(
        "SELECT a.retry_in_ms FROM webhook_attempts a JOIN webhook_deliveries d
         ON d.id = a.delivery_id WHERE d.endpoint_id = $1 ORDER BY a.id DESC LIMIT 1",
    )
    .bind(endpoint)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(last_retry, None, "no retry follows the last attempt");
}

#[sqlx::test]
async fn a_receiver_answering_410_is_disabled_with_its_reason_and_gets_nothing_more(pool: PgPool) {
    let app = app(&pool, true).await;
    let org = app.organizer("gone@example.com").await;
    let (addr, mut rx) = receiver(&[410]).await;
    let (endpoint, _) = register(&org, &format!("http://{addr}/hook"), &["order.created"]).await;
    let event = owned_published_event(&org, &[TicketSpec::new(10, 2, 2)]).await;
    let worker = worker(&pool, true);
    api_buy(&app, event.ticket_type_id(), 1, "first@example.com").await;
    next(&mut rx).await;
    until(
        &pool,
        "SELECT NOT enabled FROM webhook_endpoints WHERE id = $1",
        endpoint,
    )
    .await;

    let second = api_buy(&app, event.ticket_type_id(), 1, "second@example.com").await;
    let message = created_message(&pool, second).await;
    until(
        &pool,
        "SELECT NOT EXISTS (SELECT 1 FROM outbox_behind('webhooks') WHERE id = $1)",
        message,
    )
    .await;
    settled(&pool, endpoint).await;
    worker.abort();

    assert!(
        rx.try_recv().is_err(),
        "a disabled endpoint got another request"
    );
    let (status, deliveries): (String, i64) = sqlx::query_as(
        "SELECT string_agg(status, ','), count(*) FROM webhook_deliveries WHERE endpoint_id = $1",
    )
    .bind(endpoint)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((status.as_str(), deliveries), ("failed", 1));
    let body: Value = org
        .api(
            Method::GET,
            &format!("/api/v1/organizer/webhooks/{endpoint}"),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["enabled"], false);
    assert!(
        body["disabled_reason"]
            .as_str()
            .unwrap()
            .contains("410 Gone"),
        "{body}"
    );
    // The endpoint's page shows the reason.
    let page = org
        .get(&format!("/organizer/settings/webhooks/{endpoint}"))
        .await
        .text()
        .await
        .unwrap();
    assert!(page.contains("410 Gone"), "{page}");
    assert!(page.contains("&lt;b&gt;nope&lt;/b&gt;"), "{page}");
    assert!(!page.contains("<b>nope</b>"), "{page}");
}

#[sqlx::test]
async fn private_addresses_are_refused_at_registration_and_at_delivery(pool: PgPool) {
    let app = app(&pool, false).await;
    let org = app.organizer("private@example.com").await;
    let (addr, mut rx) = receiver(&[]).await;
    for url in [
        format!("http://{addr}/hook"),
        format!("https://{addr}/hook"),
        format!("https://localhost:{}/hook", addr.port()),
        "https://[::1]/hook".to_owned(),
        "https://10.0.0.8/hook".to_owned(),
        "https://169.254.169.254/latest".to_owned(),
        "https://user:pw@example.com/hook".to_owned(),
        "ftp://example.com/hook".to_owned(),
    ] {
        let resp = org
            .api(Method::POST, "/api/v1/organizer/webhooks")
            .json(&json!({ "url": url, "event_types": ["order.created"] }))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY, "{url}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["field"], "url", "{url}: {body}");
    }
    // The page form too, filled in again with the error.
    let resp = org
        .post_form(
            "/organizer/settings/webhooks",
            &[
                ("url", &format!("https://localhost:{}/hook", addr.port())),
                ("description", "mine"),
                ("event_types", "order.created"),
            ],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let page = resp.text().await.unwrap();
    assert!(
        page.contains(&format!("value=\"https://localhost:{}/hook\"", addr.port())),
        "{page}"
    );
    assert!(page.contains("public addresses only"), "{page}");
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM webhook_endpoints")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(count, 0);

    // At delivery: endpoints whose host now leads to loopback (written
    // straight to the table, as if its DNS had changed since) are refused
    // after resolution, and nothing reaches the receiver.
    let mut endpoints = Vec::new();
    for url in [
        format!("https://localhost:{}/hook", addr.port()),
        format!("https://{addr}/hook"),
    ] {
        let id: Uuid = sqlx::query_scalar(
            "INSERT INTO webhook_endpoints (organizer_id, url, event_types, secret)
             VALUES ($1, $2, '{order.created}', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')
             RETURNING id",
        )
        .bind(org.id)
        .bind(url)
        .fetch_one(&pool)
        .await
        .unwrap();
        endpoints.push(id);
    }
    let event = owned_published_event(&org, &[TicketSpec::new(10, 2, 2)]).await;
    let worker = worker(&pool, false);
    api_buy(&app, event.ticket_type_id(), 1, "buyer@example.com").await;
    for endpoint in &endpoints {
        until(
            &pool,
            "SELECT EXISTS (SELECT 1 FROM webhook_attempts a JOIN webhook_deliveries d
                            ON d.id = a.delivery_id WHERE d.endpoint_id = $1)",
            *endpoint,
        )
        .await;
        let (error, code, excerpt): (Option<String>, Option<i32>, String) = sqlx::query_as(
            "SELECT a.error, a.status_code, a.response_excerpt FROM webhook_attempts a
             JOIN webhook_deliveries d ON d.id = a.delivery_id
             WHERE d.endpoint_id = $1 ORDER BY a.id LIMIT 1",
        )
        .bind(endpoint)
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(error.as_deref(), Some("refused_address"), "{excerpt}");
        assert_eq!(code, None);
    }
    worker.abort();
    assert!(rx.try_recv().is_err(), "a refused address was reached");
}

#[sqlx::test]
async fn only_wanted_types_of_your_own_events_are_delivered(pool: PgPool) {
    let app = app(&pool, true).await;
    let alice = app.organizer("alice@example.com").await;
    let bob = app.organizer("bob@example.com").await;
    let (alice_addr, mut alice_rx) = receiver(&[]).await;
    let (bob_addr, mut bob_rx) = receiver(&[]).await;
    let (alice_hook, _) = register(
        &alice,
        &format!("http://{alice_addr}/hook"),
        &["order.cancelled"],
    )
    .await;
    let (bob_hook, _) =
        register(&bob, &format!("http://{bob_addr}/hook"), &["order.created"]).await;
    let alice_event = owned_published_event(&alice, &[TicketSpec::new(1, 1, 1)]).await;
    let bob_event = owned_published_event(&bob, &[TicketSpec::new(10, 2, 2)]).await;
    let worker = worker(&pool, true);

    // Alice's order sells her event out, then she cancels it: created,
    // sold out, cancelled, available again; she wants only cancellations.
    let alice_order = api_buy(&app, alice_event.ticket_type_id(), 1, "a@example.com").await;
    let resp = alice
        .api(
            Method::POST,
            &format!("/api/v1/organizer/orders/{alice_order}/cancel"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let bob_order = api_buy(&app, bob_event.ticket_type_id(), 1, "b@example.com").await;
    settled(&pool, alice_hook).await;
    settled(&pool, bob_hook).await;
    worker.abort();

    let drain = |rx: &mut mpsc::UnboundedReceiver<Received>| {
        let mut all = Vec::new();
        while let Ok(received) = rx.try_recv() {
            all.push(received.json());
        }
        all
    };
    let alice_got = drain(&mut alice_rx);
    let bob_got = drain(&mut bob_rx);
    let kinds = |got: &[Value]| -> Vec<(String, String)> {
        got.iter()
            .map(|m| {
                (
                    m["type"].as_str().unwrap().to_owned(),
                    m["data"]["order_id"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                )
            })
            .collect()
    };
    assert_eq!(
        kinds(&alice_got),
        [("order.cancelled".to_owned(), alice_order.to_string())]
    );
    assert_eq!(
        kinds(&bob_got),
        [("order.created".to_owned(), bob_order.to_string())]
    );
}

#[sqlx::test]
async fn the_webhook_api_is_owner_scoped_and_shows_the_secret_once(pool: PgPool) {
    let app = app(&pool, true).await;
    let alice = app.organizer("alice@example.com").await;
    let bob = app.organizer("bob@example.com").await;
    let (id, _) = register(&alice, "http://127.0.0.1:9/hook", &["order.created"]).await;
    let (second, _) = register(&alice, "http://127.0.0.1:9/other", &["event.cancelled"]).await;
    let one = format!("/api/v1/organizer/webhooks/{id}");
    let fake_delivery = Uuid::new_v4();

    // No token: 401 on every route.
    for (method, path) in [
        (Method::GET, "/api/v1/organizer/webhooks".to_owned()),
        (Method::POST, "/api/v1/organizer/webhooks".to_owned()),
        (Method::GET, one.clone()),
        (Method::PATCH, one.clone()),
        (Method::DELETE, one.clone()),
        (Method::GET, format!("{one}/deliveries")),
        (
            Method::POST,
            format!("{one}/deliveries/{fake_delivery}/redeliver"),
        ),
    ] {
        let resp = app
            .client
            .request(method.clone(), app.url(&path))
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "{method} {path}");
    }
    // Another organizer's token: 404, and nothing changes.
    for (method, path, body) in [
        (Method::GET, one.clone(), None),
        (
            Method::PATCH,
            one.clone(),
            Some(json!({ "enabled": false })),
        ),
        (Method::DELETE, one.clone(), None),
        (Method::POST, format!("{one}/rotate-secret"), None),
        (Method::GET, format!("{one}/deliveries"), None),
        (
            Method::POST,
            format!("{one}/deliveries/{fake_delivery}/redeliver"),
            None,
        ),
    ] {
        let mut request = bob.api(method.clone(), &path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let resp = request.send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{method} {path}");
    }
    let bob_list: Value = bob
        .api(Method::GET, "/api/v1/organizer/webhooks")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(bob_list["webhooks"], json!([]));

    // The secret is never shown again: not by GET, not in the list.
    let shown: Value = alice
        .api(Method::GET, &one)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(shown.get("secret").is_none(), "{shown}");
    assert_eq!(shown["enabled"], true);
    let page: Value = alice
        .api(Method::GET, "/api/v1/organizer/webhooks?limit=1")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(page["webhooks"].as_array().unwrap().len(), 1);
    assert!(page["webhooks"][0].get("secret").is_none(), "{page}");
    let next = page["next"].as_str().unwrap();
    let rest: Value = alice
        .api(
            Method::GET,
            &format!("/api/v1/organizer/webhooks?limit=1&after={next}"),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(rest["webhooks"][0]["id"], second.to_string());
    assert!(rest["next"].is_null(), "{rest}");

    // PATCH changes what it names; unknown fields and bad types refused.
    let resp = alice
        .api(Method::PATCH, &one)
        .json(&json!({ "enabled": false, "event_types": ["order.cancelled", "order.created"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let patched: Value = resp.json().await.unwrap();
    assert_eq!(patched["enabled"], false);
    assert_eq!(
        patched["event_types"],
        json!(["order.created", "order.cancelled"])
    );
    assert_eq!(patched["disabled_reason"], "Disabled by the organizer.");
    let resp = alice
        .api(Method::PATCH, &one)
        .json(&json!({ "secret": "whsec_mine" }))
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_client_error(), "{}", resp.status());
    let resp = alice
        .api(Method::PATCH, &one)
        .json(&json!({ "event_types": ["order.updated"] }))
        .send()
        .await
        .unwrap();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["field"], "event_types", "{body}");

    // Rotation shows a new secret once; delete is 204 then 404.
    let rotated: Value = alice
        .api(Method::POST, &format!("{one}/rotate-secret"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(rotated["secret"].as_str().unwrap().starts_with("whsec_"));
    let resp = alice.api(Method::DELETE, &one).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let resp = alice.api(Method::GET, &one).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
}

#[sqlx::test]
async fn redeliver_sends_the_same_webhook_id_again(pool: PgPool) {
    let app = app(&pool, true).await;
    let org = app.organizer("again@example.com").await;
    let (addr, mut rx) = receiver(&[]).await;
    let (endpoint, secret) =
        register(&org, &format!("http://{addr}/hook"), &["order.created"]).await;
    let event = owned_published_event(&org, &[TicketSpec::new(10, 2, 2)]).await;
    let worker = worker(&pool, true);
    let order = api_buy(&app, event.ticket_type_id(), 1, "buyer@example.com").await;
    let message = created_message(&pool, order).await;
    let first = next(&mut rx).await;
    settled(&pool, endpoint).await;

    let log: Value = org
        .api(
            Method::GET,
            &format!("/api/v1/organizer/webhooks/{endpoint}/deliveries"),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let delivery = log["deliveries"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(log["deliveries"][0]["status"], "succeeded");
    assert_eq!(log["deliveries"][0]["webhook_id"], message.to_string());
    assert_eq!(log["deliveries"][0]["log"][0]["status_code"], 200);

    // Through the API...
    let resp = org
        .api(
            Method::POST,
            &format!("/api/v1/organizer/webhooks/{endpoint}/deliveries/{delivery}/redeliver"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let second = next(&mut rx).await;
    // ...and through the endpoint page's button (CSRF-protected).
    settled(&pool, endpoint).await;
    let page = org
        .get(&format!("/organizer/settings/webhooks/{endpoint}"))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("Redeliver") && page.contains(&message.to_string()),
        "{page}"
    );
    let path = format!("/organizer/settings/webhooks/{endpoint}/deliveries/{delivery}/redeliver");
    let forged = app.client.post(app.url(&path)).send().await.unwrap();
    assert!(forged.status().is_client_error(), "{}", forged.status());
    let resp = org.post_form(&path, &[]).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let third = next(&mut rx).await;
    settled(&pool, endpoint).await;
    worker.abort();

    for received in [&first, &second, &third] {
        assert_eq!(received.id, message.to_string());
        assert!(verifies(&secret, received));
        assert_eq!(received.body, first.body);
    }
    let attempts: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
         WHERE d.endpoint_id = $1",
    )
    .bind(endpoint)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(attempts, 3);
}

#[sqlx::test]
async fn the_settings_page_adds_an_endpoint_and_shows_its_secret_once(pool: PgPool) {
    let app = app(&pool, true).await;
    let org = app.organizer("page@example.com").await;
    // Bad input comes back filled in, naming the field.
    let resp = org
        .post_form(
            "/organizer/settings/webhooks",
            &[
                ("url", "http://127.0.0.1:9/hook"),
                ("description", "<b>CRM</b>"),
            ],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let page = resp.text().await.unwrap();
    assert!(page.contains("Choose at least one event type."), "{page}");
    assert!(page.contains("value=\"http://127.0.0.1:9/hook\""), "{page}");
    assert!(page.contains("&lt;b&gt;CRM&lt;/b&gt;") && !page.contains("<b>CRM</b>"));

    let resp = org
        .post_form(
            "/organizer/settings/webhooks",
            &[
                ("url", "http://127.0.0.1:9/hook"),
                ("description", "CRM"),
                ("event_types", "order.created"),
                ("event_types", "event.cancelled"),
            ],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let page = resp.text().await.unwrap();
    let secret: String = sqlx::query_scalar("SELECT secret FROM webhook_endpoints")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(page.contains(&secret), "the new secret is shown");
    let again = org.get("/organizer/settings").await.text().await.unwrap();
    assert!(again.contains("http://127.0.0.1:9/hook"));
    assert!(again.contains("order.created, event.cancelled"));
    assert!(!again.contains(&secret), "the secret is shown once only");
    // A forged form (no CSRF field) changes nothing.
    let forged = app
        .client
        .post(app.url("/organizer/settings/webhooks"))
        .form(&[
            ("url", "http://127.0.0.1:9/x"),
            ("event_types", "order.created"),
        ])
        .send()
        .await
        .unwrap();
    assert!(forged.status().is_client_error());
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM webhook_endpoints")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(count, 1);
}

#[sqlx::test]
async fn redirects_are_not_followed_and_only_4_kib_of_an_answer_is_kept(pool: PgPool) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let followed = Arc::new(AtomicUsize::new(0));
    let counter = followed.clone();
    let receiver = Router::new()
        .route(
            "/redirect",
            post(|| async { (StatusCode::TEMPORARY_REDIRECT, [("location", "/target")]) }),
        )
        .route(
            "/target",
            post(move || {
                counter.fetch_add(1, Ordering::SeqCst);
                async { StatusCode::OK }
            }),
        )
        .route(
            "/big",
            post(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "é".repeat(50_000)) }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, receiver).await });

    let app = app(&pool, true).await;
    let org = app.organizer("odd@example.com").await;
    let (redirect, _) =
        register(&org, &format!("http://{addr}/redirect"), &["order.created"]).await;
    let (big, _) = register(&org, &format!("http://{addr}/big"), &["order.created"]).await;
    let event = owned_published_event(&org, &[TicketSpec::new(10, 2, 2)]).await;
    let worker = worker(&pool, true);
    api_buy(&app, event.ticket_type_id(), 1, "buyer@example.com").await;
    let first_attempt = |endpoint: Uuid| {
        let pool = pool.clone();
        async move {
            until(
                &pool,
                "SELECT EXISTS (SELECT 1 FROM webhook_attempts a JOIN webhook_deliveries d
                                ON d.id = a.delivery_id WHERE d.endpoint_id = $1)",
                endpoint,
            )
            .await;
            let row: (Option<i32>, String) = sqlx::query_as(
                "SELECT a.status_code, a.response_excerpt FROM webhook_attempts a
                 JOIN webhook_deliveries d ON d.id = a.delivery_id
                 WHERE d.endpoint_id = $1 ORDER BY a.id LIMIT 1",
            )
            .bind(endpoint)
            .fetch_one(&pool)
            .await
            .unwrap();
            row
        }
    };
    let (redirect_status, _) = first_attempt(redirect).await;
    let (big_status, excerpt) = first_attempt(big).await;
    worker.abort();

    assert_eq!(redirect_status, Some(307), "a redirect is a failed attempt");
    assert_eq!(
        followed.load(Ordering::SeqCst),
        0,
        "the redirect was followed"
    );
    assert_eq!(big_status, Some(500));
    // 4,096 bytes read, "é" is two: 2,048 of them.
    assert_eq!(excerpt, "é".repeat(2048));
}
