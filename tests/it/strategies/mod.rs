//! Every sale strategy (the engine's group commit and the baselines) under
//! real concurrency against real Postgres, checked from the tables; and
//! what only the engine has: batches, its bounded queue, sold-out flags.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod engine;
mod sold_out;

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
