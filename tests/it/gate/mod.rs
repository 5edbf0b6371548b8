//! The Redis gate (issue 9) against real Redis and Postgres, a module
//! per theme: faults (a crash between the gate and the
//! commit, Redis flushed, stopped, started again or slow mid-sale), buyers
//! (hammering, limits, retries), processes sharing one gate, the sell-out,
//! rebuilds and the reconcile. Never an oversell (checked from the tables),
//! and every ticket sells in the end. The helpers the modules share are here.

mod buyers;
mod faults;
mod processes;
mod rebuilds;
mod reconcile;
mod sold_out;

use std::time::Duration;

use crate::common::{
    self, TicketSpec, assert_invariants, database_url,
    gate::{PREFIX, gated, gated_with, own_gate, setup, shared_redis},
    locks::{blocked, hold_ticket_type, lock_table, wait_until_blocked},
    now, pool,
    process::ServerProcess,
    published_event,
    purchase::{fresh_key, request},
    redis_servers::OwnRedis,
    sold, until_listening,
};
use deadpool_redis::redis;
use futures::StreamExt as _;
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use stampede::{
    domain::{BuyerKey, Email},
    error::AppError,
    sale::{EngineSettings, GateRedis, GateSettings, Purchase, Sales, Strategy},
};
use uuid::Uuid;

/// Buy one ticket each under fresh buyers until `n` are sold or `tries` run out.
async fn buy_until(sales: &Sales, pool: &PgPool, tt: Uuid, n: i64, tries: usize, tag: &str) {
    for i in 0..tries {
        if sold(pool, tt).await >= n {
            return;
        }
        let req = request(tt, 1, &format!("{tag}{i}@example.org"), &fresh_key());
        match sales.purchase(now(), &req).await {
            Ok(_) | Err(AppError::SoldOut | AppError::NotEnoughLeft { .. }) => {}
            Err(err) => panic!("{err:?}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The stock hash of a ticket type, field by field.
async fn stock_hash(
    conn: &mut redis::aio::MultiplexedConnection,
    tt: Uuid,
) -> std::collections::HashMap<String, String> {
    redis::cmd("HGETALL")
        .arg(format!("{PREFIX}{{tt:{tt}}}:stock"))
        .query_async(conn)
        .await
        .unwrap()
}

/// A buyer's field in the stock hash (the folded buyer key).
fn buyer(email: &str) -> String {
    format!("b:{}", BuyerKey::from(&Email::parse(email).unwrap()))
}

/// A counter of `/metrics` (0 when it has not been counted yet).
async fn counter(server: &ServerProcess, series: &str) -> f64 {
    let text = reqwest::get(server.metrics_url())
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Wait until `sales` refuses the type without any read, asking with fresh
/// buyers (each refusal may be what tells the instance).
async fn until_refusing_without_reading(sales: &Sales, tt: Uuid, tag: &str) {
    for i in 0..200 {
        if sales.refuses_without_reading(tt.into()) {
            return;
        }
        let refused = sales
            .purchase(
                now(),
                &request(tt, 1, &format!("{tag}{i}@example.org"), &fresh_key()),
            )
            .await;
        assert!(matches!(refused, Err(AppError::SoldOut)), "{refused:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the instance never learned that the type is sold out");
}

/// Hold every command to `own` for `held` (`CLIENT PAUSE ... ALL`: Redis is
/// up and takes connections, but answers nothing until then); returns when
/// the pause ends.
async fn pause_redis(own: &OwnRedis, held: Duration) -> tokio::time::Instant {
    let _: String = own
        .cmd(
            redis::cmd("CLIENT")
                .arg("PAUSE")
                .arg(held.as_millis() as u64)
                .arg("ALL"),
        )
        .await
        .unwrap();
    tokio::time::Instant::now() + held
}

/// One buyer after another, each buying one ticket.
struct Buyers<'a> {
    sales: &'a Sales,
    tt: Uuid,
    bought: i64,
}

impl Buyers<'_> {
    async fn buy(&mut self, tag: &str) {
        let email = format!("{tag}{}@example.org", self.bought);
        let created = self
            .sales
            .purchase(now(), &request(self.tt, 1, &email, &fresh_key()))
            .await;
        assert!(
            matches!(created, Ok(Purchase::Created { .. })),
            "{created:?}"
        );
        self.bought += 1;
    }

    /// Until a purchase goes through the gate.
    async fn until_admitted(&mut self) {
        let gate = self.sales.gate().unwrap();
        let before = gate.admitted();
        for _ in 0..20 {
            self.buy("through").await;
            if gate.admitted() > before {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no purchase went through the gate");
    }
}

/// A ticket type's gate keys (its stock hash and in-flight set) deleted
/// from the shared Redis.
async fn forget_type(conn: &mut redis::aio::MultiplexedConnection, tt: Uuid) {
    let _: i64 = redis::cmd("DEL")
        .arg(format!("{PREFIX}{{tt:{tt}}}:stock"))
        .arg(format!("{PREFIX}{{tt:{tt}}}:inflight"))
        .query_async(conn)
        .await
        .unwrap();
}

/// Now, as the gate scores admissions in flight.
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The engine, one transaction per purchase (each waits in Postgres
/// visibly), behind the shared Redis with a reconcile every `reconcile_every`.
fn naive_gated(pool: &PgPool, reconcile_every: Duration, settle_within: Duration) -> Sales {
    let settings = GateSettings {
        prefix: PREFIX.into(),
        timeout: Duration::from_secs(1),
        reconcile_every,
        settle_within,
        ..GateSettings::default()
    };
    Sales::new(pool.clone(), Strategy::Naive, EngineSettings::default())
        .with_gate(GateRedis::Server(shared_redis()), settings)
        .unwrap()
}
