//! Every sale strategy (the engine's group commit and the baselines) under
//! real concurrency against real Postgres, checked from the tables; and
//! what only the engine has: batches, its bounded queue, sold-out flags.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::{
    TicketSpec, assert_invariants,
    locks::lock_table,
    now, order_count,
    purchase::{fresh_key, request},
    races::{
        GateAt, Setup, one_buyer_raced, refused_retries_leave_the_last_ticket_on_sale, rush,
        same_key_raced, seed_000, seed_001, two_instances,
    },
    remaining, sold,
};
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use stampede::{
    error::AppError,
    sale::{self, EngineSettings, Purchase, Sales, Strategy},
};
use uuid::Uuid;

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
                let setup = Setup { strategy: Strategy::Batch, gate: GateAt::Shared };
                super::$scenario(connect, setup).await;
            }
            #[sqlx::test]
            async fn naive_gated(_: PgPoolOptions, connect: PgConnectOptions) {
                let setup = Setup { strategy: Strategy::Naive, gate: GateAt::Shared };
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
    two_instances,
    refused_retries_leave_the_last_ticket_on_sale,
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

/// Sold out, an engine learns the keys of the type's orders once and then
/// refuses other buyers without reading Postgres (here the orders table is
/// locked: any read would wait), while a retry of a purchase committed
/// through another instance still gets its order back.
#[sqlx::test]
async fn sold_out_refusals_read_nothing_once_the_keys_are_known(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = rush(connect.clone(), TicketSpec::new(1, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let settings = EngineSettings {
        sold_out_lifetime: Duration::from_secs(3600),
        ..EngineSettings::default()
    };
    let seller = Sales::new(pool.clone(), Strategy::Batch, settings);
    let other = Sales::new(common::pool(connect, 4).await, Strategy::Batch, settings);
    let key = fresh_key();
    let bought = seller
        .purchase(now(), &request(tt, 1, "ada@example.org", &key))
        .await
        .unwrap();
    let refused = other
        .purchase(now(), &request(tt, 1, "bob@example.org", &fresh_key()))
        .await;
    assert!(matches!(refused, Err(AppError::SoldOut)), "{refused:?}");
    let mut known = false;
    for _ in 0..500 {
        known = other.refuses_without_reading(tt.into());
        if known {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(known, "the flag never learned the type's keys");

    let blocker = lock_table(&pool, "orders").await;
    let refused = tokio::time::timeout(
        Duration::from_secs(5),
        other.purchase(now(), &request(tt, 1, "cy@example.org", &fresh_key())),
    )
    .await;
    // Released before any assertion: a failing test then ends, rather than
    // leave a purchase waiting on the lock while the test database drops.
    blocker.rollback().await.unwrap();
    let refused = refused.expect("the refusal waited for Postgres");
    assert!(matches!(refused, Err(AppError::SoldOut)), "{refused:?}");

    let replayed = other
        .purchase(now(), &request(tt, 1, "ada@example.org", &key))
        .await
        .unwrap();
    assert_eq!(replayed, Purchase::Replayed(bought.order().clone()));
    assert_invariants(&pool).await;
    assert_eq!(sold(&pool, tt).await, 1);
    assert_eq!(order_count(&pool).await, 1);
}

/// The buyer's rate limit (`Sales::purchase_limited`) is asked before any
/// read or write, and its refusal writes nothing; a refusal known at once
/// (the type sold out, the key no order's) does not ask it, so hammering a
/// sold-out type spends none of the buyer's budget. A possible retry of a
/// committed purchase still asks it.
#[sqlx::test]
async fn the_rate_limit_is_asked_of_every_purchase_but_a_known_sell_out(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    use std::sync::atomic::{AtomicUsize, Ordering};

    let (pool, fixture) = rush(connect, TicketSpec::new(1, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let settings = EngineSettings {
        sold_out_lifetime: Duration::from_secs(3600),
        ..EngineSettings::default()
    };
    let sales = Sales::new(pool.clone(), Strategy::Batch, settings);
    let asked = AtomicUsize::new(0);
    let limited = |_: &sale::PurchaseRequest| {
        asked.fetch_add(1, Ordering::Relaxed);
        Err(AppError::TooManyRequests {
            retry_after_secs: 7,
        })
    };
    let allowed = |_: &sale::PurchaseRequest| {
        asked.fetch_add(1, Ordering::Relaxed);
        Ok(())
    };

    let key = fresh_key();
    let refused = sales
        .purchase_limited(now(), &request(tt, 1, "ada@example.org", &key), limited)
        .await;
    assert!(
        matches!(
            refused,
            Err(AppError::TooManyRequests {
                retry_after_secs: 7
            })
        ),
        "{refused:?}"
    );
    assert_eq!(asked.load(Ordering::Relaxed), 1);
    assert_eq!(order_count(&pool).await, 0);
    assert_eq!(remaining(&pool, tt).await, 1);

    let bought = sales
        .purchase_limited(now(), &request(tt, 1, "ada@example.org", &key), allowed)
        .await
        .unwrap();
    assert_eq!(asked.load(Ordering::Relaxed), 2);
    let mut known = false;
    for _ in 0..500 {
        known = sales.refuses_without_reading(tt.into());
        if known {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(known, "the flag never learned the type's keys");

    for i in 0..5 {
        let refused = sales
            .purchase_limited(
                now(),
                &request(tt, 1, &format!("fan{i}@example.org"), &fresh_key()),
                limited,
            )
            .await;
        assert!(matches!(refused, Err(AppError::SoldOut)), "{refused:?}");
    }
    assert_eq!(
        asked.load(Ordering::Relaxed),
        2,
        "a sold-out refusal asked the limit"
    );

    let replayed = sales
        .purchase_limited(now(), &request(tt, 1, "ada@example.org", &key), allowed)
        .await
        .unwrap();
    assert_eq!(replayed, Purchase::Replayed(bought.order().clone()));
    assert_eq!(
        asked.load(Ordering::Relaxed),
        3,
        "a possible retry skipped the limit"
    );
    assert_eq!(order_count(&pool).await, 1);
    assert_invariants(&pool).await;
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
