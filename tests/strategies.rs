//! Every sale strategy (the engine's group commit and the baselines) under
//! real concurrency against real Postgres, checked from the tables; and
//! what only the engine has: batches, its bounded queue, sold-out flags.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use common::{
    Fixture, TicketSpec, assert_invariants, now, order_count, pool, published_event,
    purchase::{fresh_key, request},
    remaining, sold,
};
use rand::{Rng, SeedableRng, rngs::StdRng};
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use stampede::{
    error::AppError,
    sale::{self, EngineSettings, GateSettings, Purchase, PurchaseRequest, Sales, Strategy},
};
use tokio::sync::Barrier;
use uuid::Uuid;

fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// A strategy, with or without the Redis gate in front (issue 9).
#[derive(Debug, Clone, Copy)]
struct Setup {
    strategy: Strategy,
    gate: bool,
}

impl From<Strategy> for Setup {
    fn from(strategy: Strategy) -> Self {
        Self {
            strategy,
            gate: false,
        }
    }
}

impl std::fmt::Display for Setup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let gate = if self.gate { " behind the gate" } else { "" };
        write!(f, "{}{gate}", self.strategy)
    }
}

/// An engine of `strategy`; the Redis baselines and the gate on the local
/// Redis (the gate's keys are per ticket type, fresh in every test).
fn engine(pool: &PgPool, setup: Setup) -> Sales {
    let mut sales = Sales::new(pool.clone(), setup.strategy, EngineSettings::default());
    if setup.strategy.needs_redis() {
        sales = sales.with_redis(&redis_url()).unwrap();
    }
    if setup.gate {
        let settings = GateSettings {
            prefix: "stampede:test:strategies:".into(),
            // Generous: a thousand tasks on one test thread, on a busy box
            // (a slower answer is a fallback to Postgres, also correct).
            timeout: Duration::from_secs(1),
            ..GateSettings::default()
        };
        sales = sales.with_gate(&redis_url(), settings).unwrap();
    }
    sales
}

async fn rush(connect: PgConnectOptions, spec: TicketSpec) -> (PgPool, Fixture) {
    let pool = pool(connect, 32).await;
    let fixture = published_event(&pool, &[spec]).await;
    (pool, fixture)
}

/// Every request at once (released together by a barrier), through `sales`.
async fn race(
    sales: &Sales,
    requests: Vec<PurchaseRequest>,
) -> Vec<(PurchaseRequest, Result<Purchase, AppError>)> {
    let barrier = Arc::new(Barrier::new(requests.len()));
    let tasks: Vec<_> = requests
        .into_iter()
        .map(|request| {
            let sales = sales.clone();
            let barrier = barrier.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                let result = sales.purchase(now(), &request).await;
                (request, result)
            })
        })
        .collect();
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap());
    }
    results
}

/// The answers agree with the tables: each order answered as created is
/// committed with the quantity asked, no two answers name one order, and
/// every committed order was answered.
async fn assert_answers_match_orders(
    pool: &PgPool,
    ticket_type_id: Uuid,
    results: &[(PurchaseRequest, Result<Purchase, AppError>)],
) {
    let mut answered = BTreeSet::new();
    for (request, result) in results {
        if let Ok(Purchase::Created { order, .. }) = result {
            assert!(
                answered.insert(order.id.get()),
                "two answers name one order"
            );
            assert_eq!(order.quantity, request.quantity.get());
        }
    }
    let committed: BTreeSet<Uuid> =
        sqlx::query_scalar("SELECT id FROM orders WHERE ticket_type_id = $1")
            .bind(ticket_type_id)
            .fetch_all(pool)
            .await
            .unwrap()
            .into_iter()
            .collect();
    assert_eq!(answered, committed, "answered and committed orders differ");
}

/// Seed 000 (200 buyers, 10 tickets, 1–4 each, seeded) for each strategy:
/// never oversold, every ticket sold, answers match the tables.
async fn seed_000(connect: PgConnectOptions, strategy: Setup) {
    let (pool, fixture) = rush(connect, TicketSpec::new(10, 4, 4)).await;
    let tt = fixture.ticket_type_id();
    let sales = engine(&pool, strategy);
    let seed = rand::random::<u64>();
    println!("seed 000 with rng seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let requests: Vec<_> = (0..200)
        .map(|i| {
            request(
                tt,
                rng.random_range(1..=4),
                &format!("buyer{i}@example.org"),
                &fresh_key(),
            )
        })
        .collect();
    let results = race(&sales, requests).await;
    assert_invariants(&pool).await;
    let sold_total = sold(&pool, tt).await;
    assert!(sold_total <= 10, "{strategy}: sold {sold_total} of 10");
    for (request, result) in &results {
        match result {
            Ok(Purchase::Created { .. }) => {}
            Err(AppError::SoldOut) => {}
            Err(AppError::NotEnoughLeft { remaining }) => {
                assert!(*remaining < request.quantity.get());
            }
            other => panic!("{strategy}: unexpected answer {other:?}"),
        }
    }
    // 200 buyers asking for 1–4 each: with 10 tickets, some buyer asking
    // for 1 always arrives before the end, so stock runs out entirely
    // unless a refused buyer's request was the last (checked from the table).
    let left = remaining(&pool, tt).await;
    assert_eq!(i64::from(left), 10 - sold_total);
    assert_answers_match_orders(&pool, tt, &results).await;
}

/// Seed 001 (10,000 attempts on 100 tickets, 1 each): exactly 100 sold.
async fn seed_001(connect: PgConnectOptions, strategy: Setup) {
    let (pool, fixture) = rush(connect, TicketSpec::new(100, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let sales = engine(&pool, strategy);
    let mut sold_answers = 0;
    // In waves of 1,000, so that the test's tasks stay bounded.
    for wave in 0..10 {
        let requests: Vec<_> = (0..1000)
            .map(|i| request(tt, 1, &format!("b{wave}-{i}@example.org"), &fresh_key()))
            .collect();
        for (_, result) in race(&sales, requests).await {
            match result {
                Ok(Purchase::Created { .. }) => sold_answers += 1,
                Err(AppError::SoldOut | AppError::NotEnoughLeft { .. }) => {}
                other => panic!("{strategy}: unexpected answer {other:?}"),
            }
        }
    }
    assert_invariants(&pool).await;
    assert_eq!(sold(&pool, tt).await, 100, "{strategy}");
    assert_eq!(sold_answers, 100, "{strategy}");
    assert_eq!(remaining(&pool, tt).await, 0);
    if let Some(gate) = sales.gate() {
        // The gate shed the burst: about as many purchases as tickets went
        // on to Postgres (a periodic rebuild mid-sale may let a few more by).
        let admitted = gate.admitted();
        assert!(
            (100..=200).contains(&admitted),
            "{admitted} of 10,000 admitted"
        );
    }
}

/// The same buyer and key twenty times at once: one order, and every
/// answer names it.
async fn same_key_raced(connect: PgConnectOptions, strategy: Setup) {
    let (pool, fixture) = rush(connect, TicketSpec::new(50, 4, 4)).await;
    let tt = fixture.ticket_type_id();
    let sales = engine(&pool, strategy);
    let key = fresh_key();
    let requests = (0..20)
        .map(|_| request(tt, 2, "ada@example.org", &key))
        .collect();
    let results = race(&sales, requests).await;
    assert_invariants(&pool).await;
    assert_eq!(order_count(&pool).await, 1, "{strategy}");
    assert_eq!(sold(&pool, tt).await, 2, "{strategy}");
    let ids: BTreeSet<_> = results
        .iter()
        .map(|(_, r)| r.as_ref().expect("every twin gets the order").order().id)
        .collect();
    assert_eq!(
        ids.len(),
        1,
        "{strategy}: twins answered with different orders"
    );
    let created = results
        .iter()
        .filter(|(_, r)| matches!(r, Ok(Purchase::Created { .. })))
        .count();
    assert_eq!(
        created, 1,
        "{strategy}: one twin creates, the others replay"
    );
}

/// One buyer, fifty purchases at once under fresh keys, limit 4 per buyer.
async fn one_buyer_raced(connect: PgConnectOptions, strategy: Setup) {
    let (pool, fixture) = rush(connect, TicketSpec::new(100, 1, 4)).await;
    let tt = fixture.ticket_type_id();
    let sales = engine(&pool, strategy);
    let requests = (0..50)
        .map(|_| request(tt, 1, "ada@example.org", &fresh_key()))
        .collect();
    let results = race(&sales, requests).await;
    assert_invariants(&pool).await;
    assert_eq!(sold(&pool, tt).await, 4, "{strategy}");
    let limited = results
        .iter()
        .filter(|(_, r)| matches!(r, Err(AppError::BuyerLimit { max: 4 })))
        .count();
    assert_eq!(limited, 46, "{strategy}");
}

/// Two instances (two engines, two pools) selling one ticket type.
async fn two_instances(connect: PgConnectOptions, strategy: Setup) {
    let (pool, fixture) = rush(connect.clone(), TicketSpec::new(60, 2, 2)).await;
    let other_pool = common::pool(connect, 16).await;
    let tt = fixture.ticket_type_id();
    let one = engine(&pool, strategy);
    let two = engine(&other_pool, strategy);
    let barrier = Arc::new(Barrier::new(400));
    let tasks: Vec<_> = (0..400)
        .map(|i| {
            let sales = if i % 2 == 0 { one.clone() } else { two.clone() };
            let barrier = barrier.clone();
            let request = request(tt, 1 + i % 2, &format!("b{i}@example.org"), &fresh_key());
            tokio::spawn(async move {
                barrier.wait().await;
                let result = sales.purchase(now(), &request).await;
                (request, result)
            })
        })
        .collect();
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap());
    }
    assert_invariants(&pool).await;
    assert_eq!(
        remaining(&pool, tt).await,
        60 - sold(&pool, tt).await as i32
    );
    assert!(sold(&pool, tt).await >= 59, "{strategy}: stock left unsold");
    assert_answers_match_orders(&pool, tt, &results).await;
}

macro_rules! every_strategy {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            use super::*;
            #[sqlx::test]
            async fn batch(_: PgPoolOptions, connect: PgConnectOptions) {
                super::$scenario(connect, Strategy::Batch.into()).await;
            }
            #[sqlx::test]
            async fn naive(_: PgPoolOptions, connect: PgConnectOptions) {
                super::$scenario(connect, Strategy::Naive.into()).await;
            }
            #[sqlx::test]
            async fn for_update(_: PgPoolOptions, connect: PgConnectOptions) {
                super::$scenario(connect, Strategy::ForUpdate.into()).await;
            }
            #[sqlx::test]
            async fn redis_watch(_: PgPoolOptions, connect: PgConnectOptions) {
                super::$scenario(connect, Strategy::RedisWatch.into()).await;
            }
            #[sqlx::test]
            async fn redis_lock(_: PgPoolOptions, connect: PgConnectOptions) {
                super::$scenario(connect, Strategy::RedisLock.into()).await;
            }
            /// The engine behind the Redis gate (issue 9).
            #[sqlx::test]
            async fn batch_gated(_: PgPoolOptions, connect: PgConnectOptions) {
                let setup = Setup { strategy: Strategy::Batch, gate: true };
                super::$scenario(connect, setup).await;
            }
            #[sqlx::test]
            async fn naive_gated(_: PgPoolOptions, connect: PgConnectOptions) {
                let setup = Setup { strategy: Strategy::Naive, gate: true };
                super::$scenario(connect, setup).await;
            }
        }
    )*};
}

every_strategy!(
    seed_000,
    seed_001,
    same_key_raced,
    one_buyer_raced,
    two_instances
);

/// A transaction holding the ticket type row, as a rush's batch would.
async fn hold_row(
    pool: &PgPool,
    ticket_type_id: Uuid,
) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM ticket_types WHERE id = $1 FOR UPDATE")
        .bind(ticket_type_id)
        .execute(&mut *tx)
        .await
        .unwrap();
    tx
}

/// Wait until `n` backends wait for a lock (the purchases queued behind
/// the held row): the test proves its overlap instead of hoping for it.
async fn until_waiting_for_locks(pool: &PgPool, n: i64) {
    for _ in 0..600 {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(pool)
        .await
        .unwrap();
        if waiting >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("fewer than {n} backends ever waited for the row");
}

/// A batch with bad requests in it (over the order limit, over the buyer
/// limit, a key used before for something else): they fail alone, every
/// other request commits, and the good ones shared one transaction.
#[sqlx::test]
async fn a_bad_request_fails_alone_in_its_batch(_: PgPoolOptions, connect: PgConnectOptions) {
    let (pool, fixture) = rush(connect, TicketSpec::new(100, 2, 2)).await;
    let tt = fixture.ticket_type_id();
    let sales = Sales::new(pool.clone(), Strategy::Batch, EngineSettings::default());
    let used_key = fresh_key();
    sales
        .purchase(now(), &request(tt, 1, "eve@example.org", &used_key))
        .await
        .unwrap();

    // The first purchase's batch waits for the row; the rest gather behind it.
    let held = hold_row(&pool, tt).await;
    let first = {
        let sales = sales.clone();
        let request = request(tt, 1, "first@example.org", &fresh_key());
        tokio::spawn(async move { sales.purchase(now(), &request).await })
    };
    until_waiting_for_locks(&pool, 1).await;
    let mut requests: Vec<_> = (0..20)
        .map(|i| request(tt, 1, &format!("good{i}@example.org"), &fresh_key()))
        .collect();
    requests.insert(3, request(tt, 3, "greedy@example.org", &fresh_key()));
    requests.insert(7, request(tt, 2, "eve@example.org", &fresh_key()));
    requests.insert(9, request(tt, 2, "eve@example.org", &used_key));
    let tasks: Vec<_> = requests
        .into_iter()
        .map(|request| {
            let sales = sales.clone();
            tokio::spawn(async move {
                let result = sales.purchase(now(), &request).await;
                (request, result)
            })
        })
        .collect();
    // Let them all reach the queue, then release the row.
    tokio::time::sleep(Duration::from_millis(300)).await;
    held.rollback().await.unwrap();
    first.await.unwrap().unwrap();
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap());
    }

    assert_invariants(&pool).await;
    for (request, result) in &results {
        match request.email.as_str() {
            "greedy@example.org" => {
                assert!(
                    matches!(result, Err(AppError::OrderLimit { max: 2 })),
                    "{result:?}"
                )
            }
            "eve@example.org" if request.idempotency_key.as_str() == used_key => {
                assert!(
                    matches!(result, Err(AppError::IdempotencyConflict)),
                    "{result:?}"
                )
            }
            "eve@example.org" => {
                assert!(
                    matches!(result, Err(AppError::BuyerLimit { max: 2 })),
                    "{result:?}"
                )
            }
            _ => assert!(matches!(result, Ok(Purchase::Created { .. })), "{result:?}"),
        }
    }
    // 1 (eve) + 1 (first) + 20 (good).
    assert_eq!(sold(&pool, tt).await, 22);
    // The twenty good orders were written by at most two transactions
    // (one batch, or two if the queue was read while they arrived).
    let transactions: i64 = sqlx::query_scalar(
        "SELECT count(DISTINCT xmin::text) FROM orders WHERE email LIKE 'good%'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(
        transactions <= 2,
        "20 purchases took {transactions} transactions"
    );
}

/// A full queue answers 503 at once and writes nothing for that request.
#[sqlx::test]
async fn a_full_queue_refuses_at_once_and_writes_nothing(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = rush(connect, TicketSpec::new(100, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let settings = EngineSettings {
        max_batch: 1,
        queue_capacity: 1,
        ..EngineSettings::default()
    };
    let sales = Sales::new(pool.clone(), Strategy::Batch, settings);
    let held = hold_row(&pool, tt).await;
    let spawn = |email: &'static str| {
        let sales = sales.clone();
        let request = request(tt, 1, email, &fresh_key());
        tokio::spawn(async move { sales.purchase(now(), &request).await })
    };
    // One in the worker's batch (waiting for the row), one in the queue.
    let in_batch = spawn("a@example.org");
    until_waiting_for_locks(&pool, 1).await;
    let queued = spawn("b@example.org");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let refused = sales
        .purchase(now(), &request(tt, 1, "c@example.org", &fresh_key()))
        .await;
    assert!(matches!(refused, Err(AppError::Overloaded)), "{refused:?}");
    held.rollback().await.unwrap();
    in_batch.await.unwrap().unwrap();
    queued.await.unwrap().unwrap();
    assert_invariants(&pool).await;
    let refused_orders: i64 =
        sqlx::query_scalar("SELECT count(*) FROM orders WHERE email = 'c@example.org'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(refused_orders, 0);
    assert_eq!(sold(&pool, tt).await, 2);
}

/// The event unpublished while a batch waits for the row: the batch reads
/// the event after taking the lock and refuses, writing nothing.
#[sqlx::test]
async fn a_batch_waiting_for_the_row_sees_the_event_unpublished(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = rush(connect, TicketSpec::new(100, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let sales = Sales::new(pool.clone(), Strategy::Batch, EngineSettings::default());
    let held = hold_row(&pool, tt).await;
    let waiting = {
        let sales = sales.clone();
        let request = request(tt, 1, "a@example.org", &fresh_key());
        tokio::spawn(async move { sales.purchase(now(), &request).await })
    };
    until_waiting_for_locks(&pool, 1).await;
    // In the holding transaction: its trigger copies the status onto the
    // held row, which no other transaction could update meanwhile.
    let mut held = held;
    sqlx::query("UPDATE events SET status = 'draft' WHERE id = $1")
        .bind(fixture.event_id)
        .execute(&mut *held)
        .await
        .unwrap();
    held.commit().await.unwrap();
    let result = waiting.await.unwrap();
    assert!(matches!(result, Err(AppError::NotFound)), "{result:?}");
    assert_eq!(order_count(&pool).await, 0);
    assert_eq!(remaining(&pool, tt).await, 100);
    assert_invariants(&pool).await;
}

/// Sold out, an engine refuses from its flag; a cancellation made through
/// another instance clears the flag (LISTEN/NOTIFY), and the ticket sells
/// again. A committed purchase retried after the sell-out still replays.
#[sqlx::test]
async fn a_cancellation_elsewhere_clears_the_sold_out_flag(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = rush(connect.clone(), TicketSpec::new(1, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    // Flags that never lapse by themselves: only the notification clears them.
    let settings = EngineSettings {
        sold_out_lifetime: Duration::from_secs(3600),
        ..EngineSettings::default()
    };
    let sales = Sales::new(pool.clone(), Strategy::Batch, settings);
    let key = fresh_key();
    let bought = sales
        .purchase(now(), &request(tt, 1, "ada@example.org", &key))
        .await
        .unwrap();
    let refused = sales
        .purchase(now(), &request(tt, 1, "bob@example.org", &fresh_key()))
        .await;
    assert!(matches!(refused, Err(AppError::SoldOut)), "{refused:?}");
    // The flag is set now; idempotency still holds behind it.
    let replayed = sales
        .purchase(now(), &request(tt, 1, "ada@example.org", &key))
        .await
        .unwrap();
    assert_eq!(replayed, Purchase::Replayed(bought.order().clone()));

    // Another instance: its own pool, no shared memory.
    let elsewhere = common::pool(connect, 2).await;
    sale::cancel(&elsewhere, now(), bought.order().id, bought.cancel_secret())
        .await
        .unwrap();

    let mut sold_again = None;
    for _ in 0..1000 {
        match sales
            .purchase(now(), &request(tt, 1, "cy@example.org", &fresh_key()))
            .await
        {
            Ok(purchase) => {
                sold_again = Some(purchase);
                break;
            }
            Err(AppError::SoldOut) => tokio::time::sleep(Duration::from_millis(10)).await,
            Err(err) => panic!("{err:?}"),
        }
    }
    assert!(sold_again.is_some(), "the flag was never cleared");
    assert_invariants(&pool).await;
    assert_eq!(sold(&pool, tt).await, 1);
}

/// Postgres slow: the row held elsewhere past the purchase's deadline. The
/// buyer gets 503 (Overloaded) and the purchase is never written, not even
/// once the row is free; the next purchase goes through.
#[sqlx::test]
async fn a_purchase_past_its_deadline_is_refused_and_never_written(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = rush(connect, TicketSpec::new(100, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let settings = EngineSettings {
        deadline: Duration::from_millis(500),
        ..EngineSettings::default()
    };
    let sales = Sales::new(pool.clone(), Strategy::Batch, settings);
    let held = hold_row(&pool, tt).await;
    let late = sales
        .purchase(now(), &request(tt, 1, "late@example.org", &fresh_key()))
        .await;
    assert!(matches!(late, Err(AppError::Overloaded)), "{late:?}");
    held.rollback().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(order_count(&pool).await, 0);
    assert_eq!(remaining(&pool, tt).await, 100);

    sales
        .purchase(now(), &request(tt, 1, "next@example.org", &fresh_key()))
        .await
        .unwrap();
    assert_eq!(sold(&pool, tt).await, 1);
    assert_invariants(&pool).await;
}
