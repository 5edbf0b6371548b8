//! The waiting room (issue 12) against real Postgres: the shuffle is a
//! permutation anyone can recompute from the revealed seed, later arrivals
//! queue in arrival order, every purchase of a queued event needs a valid,
//! unspent pass (refusals write nothing), and admission is one admitter at
//! a time, within the rate, replaced when it dies. The helpers are here; a
//! module per theme.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admission;
mod joining;
mod order;
mod pages;
mod passes;
mod polls;

use crate::common;

use std::time::Duration as StdDuration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sqlx::{Connection, PgPool, postgres::PgConnection};
use stampede::{
    AppState,
    clock::{Clock as _, ManualClock},
    domain::{EventId, QueueEntryId},
    sale::{EngineSettings, Purchase, Sales, Strategy},
    waiting_room::{self, RoomKey, RoomSettings, Rooms},
};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

use common::{Fixture, TestApp, TicketSpec, event_with_window, now, order_count, published_event};

fn settings(per_minute: i32) -> RoomSettings {
    RoomSettings {
        enabled: true,
        admit_per_minute: Some(per_minute),
        ..RoomSettings::default()
    }
}

/// What the room's tables and the sale's hold, to show a refusal wrote nothing.
async fn written(pool: &PgPool) -> (i64, i64, i64, i64) {
    let count = |table: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(&format!("SELECT count(*) FROM {table}"))
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    (
        order_count(pool).await,
        count("tickets").await,
        count("outbox").await,
        count("buyer_holdings").await,
    )
}

/// The order by the published rule, computed here on its own: SHA-256 of
/// the seed's bytes then the id's 16 bytes, ascending; ties by id.
fn recompute(seed_hex: &str, ids: &[Uuid]) -> Vec<Uuid> {
    let seed = hex::decode(seed_hex).unwrap();
    let mut keyed: Vec<([u8; 32], Uuid)> = ids
        .iter()
        .map(|id| {
            let mut h = Sha256::new();
            h.update(&seed);
            h.update(id.as_bytes());
            (h.finalize().into(), *id)
        })
        .collect();
    keyed.sort();
    keyed.into_iter().map(|(_, id)| id).collect()
}

/// Spearman's rank correlation of two rankings of the same n items.
fn spearman(ranks_a: &[usize], ranks_b: &[usize]) -> f64 {
    let n = ranks_a.len() as f64;
    let d2: f64 = ranks_a
        .iter()
        .zip(ranks_b)
        .map(|(a, b)| {
            let d = *a as f64 - *b as f64;
            d * d
        })
        .sum();
    1.0 - 6.0 * d2 / (n * (n * n - 1.0))
}

async fn queue_order(pool: &PgPool, event_id: Uuid) -> Vec<Uuid> {
    sqlx::query_scalar("SELECT id FROM queue_entries WHERE event_id = $1 ORDER BY position, seq")
        .bind(event_id)
        .fetch_all(pool)
        .await
        .unwrap()
}

/// An app whose passes are signed with `key`, over a room-on event whose
/// sale opened an hour ago.
async fn queued_app(pool: &PgPool, key: &RoomKey) -> (TestApp, Fixture) {
    let fixture = published_event(pool, &[TicketSpec::new(10, 2, 2)]).await;
    waiting_room::save(pool, EventId::from(fixture.event_id), &settings(60))
        .await
        .unwrap();
    let clock = ManualClock::new(now());
    // One buyer's many attempts: the purchase rate limits are not under test.
    let mut limits = stampede::web::Limits::default();
    limits.purchase_rates.per_ip_burst = 0;
    limits.purchase_rates.per_email_burst = 0;
    let state = AppState::new(pool.clone())
        .with_clock(clock.clone())
        .with_limits(limits)
        .with_list_cache_ttl(StdDuration::ZERO)
        .with_rooms(common::test_rooms(key.clone(), 10));
    (
        TestApp::spawn_state(pool.clone(), clock, state).await,
        fixture,
    )
}

async fn order(
    app: &TestApp,
    ticket_type_id: Uuid,
    key: &str,
    pass: Option<&str>,
) -> (StatusCode, Value) {
    let mut body = json!({
        "ticket_type_id": ticket_type_id,
        "quantity": 1,
        "email": "fan@example.org",
        "idempotency_key": key,
    });
    if let Some(pass) = pass {
        body["pass"] = json!(pass);
    }
    let resp = app
        .client
        .post(app.url("/api/v1/orders"))
        .json(&body)
        .send()
        .await
        .unwrap();
    (resp.status(), resp.json().await.unwrap())
}

async fn entries(pool: &PgPool, rooms: &Rooms, event_id: EventId, n: usize, at: OffsetDateTime) {
    for _ in 0..n {
        waiting_room::join(
            pool,
            rooms,
            event_id,
            None,
            Some(&common::proof(rooms, event_id, at)),
            None,
            at,
        )
        .await
        .unwrap();
    }
}

async fn admitted(pool: &PgPool, event_id: EventId) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM queue_entries WHERE event_id = $1 AND admitted_at IS NOT NULL",
    )
    .bind(event_id.get())
    .fetch_one(pool)
    .await
    .unwrap()
}

/// A challenge from the API, solved by the rule, as any client would.
async fn api_proof(client: &reqwest::Client, app: &TestApp, event_id: Uuid) -> String {
    let challenge: Value = client
        .get(app.url(&format!("/api/v1/events/{event_id}/queue/challenge")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let bits = u32::try_from(challenge["difficulty_bits"].as_u64().unwrap()).unwrap();
    assert_eq!(challenge["expected_hashes"], 1_u64 << bits);
    waiting_room::solve(challenge["challenge"].as_str().unwrap(), bits)
}

/// A browser: keeps its cookies, follows no redirects.
fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .cookie_store(true)
        .build()
        .unwrap()
}

async fn text(client: &reqwest::Client, url: String) -> String {
    client.get(url).send().await.unwrap().text().await.unwrap()
}

async fn post(
    client: &reqwest::Client,
    url: String,
    fields: &[(&str, &str)],
    csrf: &str,
) -> reqwest::Response {
    client
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(common::forms::with_csrf(fields, csrf))
        .send()
        .await
        .unwrap()
}

async fn api_join(
    app: &TestApp,
    event_id: Uuid,
    body: Option<Value>,
    token: Option<&str>,
) -> (StatusCode, Value) {
    let mut request = app
        .client
        .post(app.url(&format!("/api/v1/events/{event_id}/queue")));
    if let Some(body) = body {
        request = request.json(&body);
    }
    if let Some(token) = token {
        request = request.header("stampede-queue-entry", token);
    }
    let resp = request.send().await.unwrap();
    (resp.status(), resp.json().await.unwrap())
}

async fn entry_count(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM queue_entries")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// How many entries are ahead of `entry` and not yet admitted, counted
/// the slow way: by the admission order (pre-queue places, then arrivals).
async fn counted_ahead(pool: &PgPool, event_id: Uuid, entry: Uuid) -> i64 {
    let order = queue_order(pool, event_id).await;
    let admitted: std::collections::HashSet<Uuid> = sqlx::query_scalar(
        "SELECT id FROM queue_entries WHERE event_id = $1 AND admitted_at IS NOT NULL",
    )
    .bind(event_id)
    .fetch_all(pool)
    .await
    .unwrap()
    .into_iter()
    .collect();
    let at = order.iter().position(|id| *id == entry).unwrap();
    order[..at]
        .iter()
        .filter(|id| !admitted.contains(id))
        .count() as i64
}

fn figure_in(page: &str, name: &str) -> String {
    let marker = format!("data-figure=\"{name}\">");
    let start = page.find(&marker).unwrap() + marker.len();
    page[start..].split('<').next().unwrap().to_owned()
}
