//! Bursts through real HTTP: the router in-process (10,000 attempts at
//! once) and two separate `stampede serve` processes on one database.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Instant,
};

use common::{
    TestApp, TicketSpec, assert_invariants, confirmed_order_ids, database_url,
    process::ServerProcess, published_event, sold,
};
use futures::{StreamExt, stream};
use serde_json::{Value, json};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use uuid::Uuid;

/// What one attempt got back, reduced to what the test checks.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Answer {
    Sold(Uuid),
    Replayed(Uuid),
    Refused(String),
    Other(u16, String),
}

async fn buy_api(client: &reqwest::Client, base: &str, body: Value) -> Answer {
    let response = client
        .post(format!("{base}/api/v1/orders"))
        .json(&body)
        .send()
        .await
        .expect("request reaches the server");
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    let id = || body["id"].as_str().and_then(|s| Uuid::parse_str(s).ok());
    match (status, id()) {
        (201, Some(id)) => Answer::Sold(id),
        (200, Some(id)) => Answer::Replayed(id),
        (409, _) => Answer::Refused(body["error"]["code"].as_str().unwrap_or("?").to_owned()),
        _ => Answer::Other(status, body.to_string()),
    }
}

async fn buy_form(
    client: &reqwest::Client,
    base: &str,
    event_id: Uuid,
    fields: &[(&str, String)],
) -> Answer {
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let response = client
        .post(format!("{base}/events/{event_id}/orders"))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("cookie", common::csrf_cookie())
        .body(common::form_body(&fields))
        .send()
        .await
        .expect("request reaches the server");
    let status = response.status().as_u16();
    let location = response
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let text = response.text().await.unwrap_or_default();
    match (status, location) {
        (303, Some(location)) => {
            let id = location
                .strip_prefix("/orders/")
                .map(|s| s.split_once("?s=").map_or(s, |(id, _)| id))
                .and_then(|s| Uuid::parse_str(s).ok());
            id.map_or(Answer::Other(303, location), Answer::Sold)
        }
        (409, _) if text.contains("Sold out") => Answer::Refused("sold_out".into()),
        _ => Answer::Other(status, text),
    }
}

/// Every buyer of these bursts is 127.0.0.1: the per-address purchase
/// limit is off, as for a loopback benchmark.
const BURSTS_FROM_LOOPBACK: &[&str] = &["--purchase-burst-per-ip", "0"];

/// Seed 001: 10,000 attempts on 100 tickets, half through the JSON API and
/// half through the HTML form, 64 at a time.
#[sqlx::test]
async fn ten_thousand_attempts_on_a_hundred_tickets_sell_exactly_a_hundred(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = common::pool(connect, 16).await;
    let fixture = published_event(&pool, &[TicketSpec::new(100, 1, 1)]).await;
    let tt = fixture.ticket_type_id();
    let app = TestApp::spawn_for_bursts(pool.clone()).await;
    let base = app.url("");

    let started = Instant::now();
    let answers: Vec<Answer> = stream::iter(0..10_000)
        .map(|i| {
            let (client, base) = (app.client.clone(), base.clone());
            async move {
                let email = format!("fan{i}@example.org");
                let key = Uuid::new_v4().to_string();
                if i % 2 == 0 {
                    let body = json!({"ticket_type_id": tt, "quantity": 1, "email": email, "idempotency_key": key});
                    buy_api(&client, &base, body).await
                } else {
                    let fields = [
                        ("ticket_type_id", tt.to_string()),
                        ("quantity", "1".to_owned()),
                        ("email", email),
                        ("idempotency_key", key),
                    ];
                    buy_form(&client, &base, fixture.event_id, &fields).await
                }
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let elapsed = started.elapsed();
    eprintln!("10,000 attempts on 100 tickets over HTTP took {elapsed:.2?}");

    let others: Vec<_> = answers
        .iter()
        .filter(|a| matches!(a, Answer::Other(..)))
        .take(5)
        .collect();
    assert!(
        others.is_empty(),
        "errors instead of clean answers: {others:?}"
    );
    let sold_ids: BTreeSet<Uuid> = answers
        .iter()
        .filter_map(|a| match a {
            Answer::Sold(id) => Some(*id),
            _ => None,
        })
        .collect();
    let refusals = answers
        .iter()
        .filter(|a| **a == Answer::Refused("sold_out".into()))
        .count();
    assert_eq!(sold_ids.len(), 100, "exactly 100 successes");
    assert_eq!(refusals, 9_900, "9,900 clean sold-out refusals");
    assert_eq!(sold(&pool, tt).await, 100);
    assert_eq!(
        sold_ids,
        confirmed_order_ids(&pool).await,
        "every success is one committed order"
    );
    assert_invariants(&pool).await;
    pool.close().await;
}

#[sqlx::test]
async fn two_server_processes_sharing_one_database_never_oversell(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = common::pool(connect.clone(), 4).await;
    let fixture = published_event(&pool, &[TicketSpec::new(50, 2, 2)]).await;
    let tt = fixture.ticket_type_id();
    let url = database_url(&connect);
    let (a, b) = tokio::join!(
        ServerProcess::start(&url, BURSTS_FROM_LOOPBACK),
        ServerProcess::start(&url, BURSTS_FROM_LOOPBACK)
    );
    let client = reqwest::Client::new();

    let buyers = 1_000;
    let answers: Vec<(usize, Answer, Answer)> = stream::iter(0..buyers)
        .map(|i| {
            let (client, a, b) = (client.clone(), a.base.clone(), b.base.clone());
            async move {
                let body = json!({
                    "ticket_type_id": tt,
                    "quantity": 1 + (i % 2),
                    "email": format!("twin{i}@example.org"),
                    "idempotency_key": format!("key-{i}-0123456789abcdef"),
                });
                let (first, second) = tokio::join!(
                    buy_api(&client, &a, body.clone()),
                    buy_api(&client, &b, body)
                );
                (i, first, second)
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;

    assert_invariants(&pool).await;
    assert_eq!(
        sold(&pool, tt).await,
        50,
        "demand far above supply sells out exactly"
    );
    let orders: BTreeMap<String, i64> =
        sqlx::query_as::<_, (String, i64)>("SELECT email, count(*) FROM orders GROUP BY email")
            .fetch_all(&pool)
            .await
            .unwrap()
            .into_iter()
            .collect();
    let mut answered = BTreeSet::new();
    for (i, first, second) in &answers {
        let email = format!("twin{i}@example.org");
        assert!(
            orders.get(&email).copied().unwrap_or(0) <= 1,
            "{email} has two orders for one key"
        );
        let ids: Vec<Uuid> = [first, second]
            .iter()
            .filter_map(|a| match a {
                Answer::Sold(id) | Answer::Replayed(id) => Some(*id),
                _ => None,
            })
            .collect();
        for answer in [first, second] {
            assert!(
                matches!(
                    answer,
                    Answer::Sold(_) | Answer::Replayed(_) | Answer::Refused(_)
                ),
                "buyer {i}: unexpected {answer:?}"
            );
        }
        // A buyer who was told "you have tickets" hears it from both
        // instances, about the same order.
        if !ids.is_empty() {
            assert_eq!(
                ids.len(),
                2,
                "buyer {i}: one instance sold, the other refused: {first:?} {second:?}"
            );
            assert_eq!(
                ids[0], ids[1],
                "buyer {i}: two different orders for one key"
            );
            answered.insert(ids[0]);
        }
    }
    assert_eq!(
        answered,
        confirmed_order_ids(&pool).await,
        "every committed order was answered"
    );

    a.stop();
    b.stop();
    pool.close().await;
}
