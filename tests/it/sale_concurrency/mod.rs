//! The sale path under real concurrency against real Postgres. Every test
//! checks the sale invariants (`common::assert_invariants`) from the
//! tables, never from responses.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod buyers;
mod changes;
mod guards;
mod rush;

use crate::common;

use std::{collections::BTreeSet, sync::Arc};

use common::{
    Fixture, TicketSpec, assert_invariants, confirmed_order_ids, now, order_count, pool,
    published_event,
    purchase::{fresh_key, request},
    remaining, set_capacity, sold,
};
use rand::{Rng, SeedableRng, rngs::StdRng};
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use stampede::{
    domain::{CancelSecret, OrderStatus},
    error::AppError,
    sale::{self, Purchase, PurchaseRequest},
};
use time::Duration as Span;
use tokio::sync::Barrier;
use uuid::Uuid;

/// A 32-connection pool (for real concurrency) and a published event with
/// one ticket type of `spec`.
async fn rush(connect: PgConnectOptions, spec: TicketSpec) -> (PgPool, Fixture) {
    let pool = pool(connect, 32).await;
    let fixture = published_event(&pool, &[spec]).await;
    (pool, fixture)
}

/// One purchase right now, under a fresh idempotency key.
async fn buy_now(
    pool: &PgPool,
    ticket_type_id: Uuid,
    quantity: i64,
    email: &str,
) -> Result<Purchase, AppError> {
    sale::purchase(
        pool,
        now(),
        &request(ticket_type_id, quantity, email, &fresh_key()),
    )
    .await
}

/// The name of the constraint a refused statement violated, if any.
fn violated_constraint(err: &sqlx::Error) -> Option<String> {
    err.as_database_error()
        .and_then(|e| e.constraint())
        .map(str::to_owned)
}

/// Run every request at once (released together by a barrier).
async fn race(
    pool: &PgPool,
    requests: Vec<PurchaseRequest>,
) -> Vec<(PurchaseRequest, Result<Purchase, AppError>)> {
    let barrier = Arc::new(Barrier::new(requests.len()));
    let tasks: Vec<_> = requests
        .into_iter()
        .map(|request| {
            let pool = pool.clone();
            let barrier = barrier.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                let result = sale::purchase(&pool, now(), &request).await;
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
