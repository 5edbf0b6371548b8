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

mod delivery;
mod endpoints;

use crate::common;

use std::{
    collections::VecDeque,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{Router, body::Bytes, extract::State, http::HeaderMap, routing::post};
use base64::{Engine, engine::general_purpose::STANDARD};
use common::{
    Organizer, TestApp, TicketSpec, api_buy, now, organizer::owned_published_event, scrape_metrics,
};
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
