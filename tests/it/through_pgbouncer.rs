//! Stampede through PgBouncer 1.18 in transaction pooling (issue 37), with
//! fewer server connections than clients so that they are shared. A plain
//! sqlx pool fails there (its prepared statements live on server
//! connections it does not keep); the pool `--db-transaction-pooler` makes
//! runs every statement, transaction, failure and snapshot correctly; and
//! the `stampede` binary sells a rush through it exactly, and through a
//! restart of Postgres behind it.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use clap::Parser as _;
use futures::StreamExt as _;
use serde_json::json;
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use stampede::{
    config::{Cli, connect_pool},
    domain::{EventId, OrganizerId},
};
use uuid::Uuid;

use crate::common::{
    TicketSpec, assert_invariants, database_url, pgbouncer::PgBouncer, pool,
    private_postgres::PrivatePostgres, process::ServerProcess, published_event,
    purchase::fresh_key,
};

/// The app's pool as `stampede serve --db-transaction-pooler` makes it.
async fn app_pool(options: PgConnectOptions) -> PgPool {
    let cli = Cli::parse_from([
        "stampede",
        "--db-transaction-pooler",
        "--db-max-connections",
        "8",
    ]);
    connect_pool(options, &cli.serve.database).await.unwrap()
}

/// 16 clients on 2 server connections, each running `rounds` of a
/// parameterised query, a transaction that writes and reads back, a
/// statement that fails, and the dashboard's snapshot; the errors.
async fn workload(db: &PgPool, fixture_ids: (Uuid, Uuid), rounds: usize) -> Vec<String> {
    let (organizer, event) = fixture_ids;
    futures::stream::iter(0..16)
        .map(|client| async move {
            let mut errors = Vec::new();
            for round in 0..rounds {
                let n = (client * 1000 + round) as i64;
                match sqlx::query_scalar::<_, i64>("SELECT $1::bigint + 1")
                    .bind(n)
                    .fetch_one(db)
                    .await
                {
                    Ok(got) => assert_eq!(got, n + 1, "a statement answered another's"),
                    Err(err) => errors.push(err.to_string()),
                }
                let written = async {
                    let mut tx = db.begin().await?;
                    sqlx::query("INSERT INTO pooled (n) VALUES ($1)")
                        .bind(n)
                        .execute(&mut *tx)
                        .await?;
                    let seen: i64 = sqlx::query_scalar("SELECT count(*) FROM pooled WHERE n = $1")
                        .bind(n)
                        .fetch_one(&mut *tx)
                        .await?;
                    tx.commit().await?;
                    Ok::<_, sqlx::Error>(seen)
                };
                match written.await {
                    Ok(seen) => assert_eq!(seen, 1, "a transaction did not see its own row"),
                    Err(err) => errors.push(err.to_string()),
                }
                // A unique violation is the statement's own error, and the
                // next use of the pool is not hurt by it.
                match sqlx::query("INSERT INTO pooled (n) VALUES ($1)")
                    .bind(n)
                    .execute(db)
                    .await
                {
                    Err(sqlx::Error::Database(err)) if err.code().as_deref() == Some("23505") => {}
                    other => errors.push(format!("a duplicate gave {other:?}")),
                }
                match stampede::db::dashboard::sales(
                    db,
                    OrganizerId::from(organizer),
                    EventId::from(event),
                )
                .await
                {
                    Ok((_, totals)) => assert_eq!(totals.capacity, 50),
                    Err(err) => errors.push(err.to_string()),
                }
            }
            errors
        })
        .buffer_unordered(16)
        .concat()
        .await
}

async fn set_up(direct: &PgConnectOptions) -> ((Uuid, Uuid), PgPool) {
    let setup = pool(direct.clone(), 2).await;
    sqlx::query("CREATE TABLE pooled (n bigint PRIMARY KEY)")
        .execute(&setup)
        .await
        .unwrap();
    let fixture = published_event(&setup, &[TicketSpec::new(50, 1, 1)]).await;
    ((fixture.organizer_id, fixture.event_id), setup)
}

/// The control: through this pooler a plain sqlx pool (named prepared
/// statements, cached per client connection) breaks, so the test below
/// exercises what it claims to.
#[sqlx::test]
async fn a_plain_sqlx_pool_breaks_behind_pgbouncer_in_transaction_mode(
    _: PgPoolOptions,
    direct: PgConnectOptions,
) {
    let (ids, _setup) = set_up(&direct).await;
    let bouncer = PgBouncer::start(&direct, 2).await;
    let plain = pool(bouncer.options(&direct), 8).await;
    let errors = workload(&plain, ids, 5).await;
    assert!(
        errors.iter().any(|e| e.contains("prepared statement")),
        "a plain pool worked through PgBouncer in transaction mode: {errors:?}"
    );
}

#[sqlx::test]
async fn the_transaction_pooler_pool_runs_everything_behind_pgbouncer(
    _: PgPoolOptions,
    direct: PgConnectOptions,
) {
    let (ids, setup) = set_up(&direct).await;
    let bouncer = PgBouncer::start(&direct, 2).await;
    let db = app_pool(bouncer.options(&direct)).await;
    let errors = workload(&db, ids, 25).await;
    assert!(
        errors.is_empty(),
        "{} errors: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM pooled")
        .fetch_one(&setup)
        .await
        .unwrap();
    assert_eq!(rows, 16 * 25, "every committed row is there, once");
    // Nothing is left open on a server connection: the pool's COMMIT came
    // back with each connection (checked while the pool is still open,
    // once the returns have run).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let open: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
           AND state LIKE 'idle in transaction%'",
    )
    .fetch_one(&setup)
    .await
    .unwrap();
    assert_eq!(open, 0, "a server connection was left in a transaction");
    db.close().await;
}

/// `stampede serve` through `bouncer` (its migrations and LISTEN straight
/// to `direct`), the purchase limits per address and email off: one client.
async fn serve_through(bouncer: &PgBouncer, direct: &PgConnectOptions) -> ServerProcess {
    ServerProcess::start(
        &database_url(&bouncer.options(direct)),
        &[
            "--db-transaction-pooler",
            "--database-direct-url",
            &database_url(direct),
            "--purchase-burst-per-ip",
            "0",
            "--purchase-burst-per-email",
            "0",
        ],
    )
    .await
}

/// The binary, through PgBouncer (migrations and the LISTEN go direct):
/// 300 buyers for 200 tickets; exactly 200 sold, every answer a sale or
/// sold out, the invariants hold.
#[sqlx::test]
async fn stampede_sells_a_rush_exactly_through_pgbouncer(
    _: PgPoolOptions,
    direct: PgConnectOptions,
) {
    let setup = pool(direct.clone(), 2).await;
    let fixture = published_event(&setup, &[TicketSpec::new(200, 1, 1)]).await;
    let tt = fixture.ticket_type_id();
    let bouncer = PgBouncer::start(&direct, 3).await;
    let server = serve_through(&bouncer, &direct).await;
    let client = reqwest::Client::new();
    let url = format!("{}/api/v1/orders", server.base);
    let statuses: Vec<u16> = futures::stream::iter(0..300)
        .map(|i| {
            let (client, url) = (client.clone(), url.clone());
            async move {
                let response = client
                    .post(&url)
                    .json(&json!({
                        "ticket_type_id": tt, "quantity": 1,
                        "email": format!("pooled{i}@example.org"), "idempotency_key": fresh_key(),
                    }))
                    .send()
                    .await
                    .unwrap();
                response.status().as_u16()
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    let sold = statuses.iter().filter(|s| **s == 201 || **s == 200).count();
    let refused = statuses.iter().filter(|s| **s == 409).count();
    assert_eq!((sold, refused), (200, 100), "statuses: {statuses:?}");
    let page = client
        .get(format!("{}/events/{}", server.base, fixture.event_id))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert_invariants(&setup).await;
}

/// Postgres restarted (fast: every connection cut) in the middle of a rush
/// through PgBouncer, on a Postgres of the test's own: meanwhile buyers get
/// 503 with Retry-After, never a 500; each, retrying with its key, ends
/// with its one order or sold out; every answered order is committed and
/// every committed one was answered; nothing is oversold.
#[sqlx::test]
async fn postgres_restarted_behind_pgbouncer_mid_rush_loses_no_order_and_answers_no_500(
    _: PgPoolOptions,
    _: PgConnectOptions,
) {
    let postgres = PrivatePostgres::start().await;
    let direct = postgres.options("stampede_restart");
    let bouncer = PgBouncer::start(&postgres.options("postgres"), 4).await;
    let server = serve_through(&bouncer, &direct).await;
    let setup = pool(direct.clone(), 2).await;
    let fixture = published_event(&setup, &[TicketSpec::new(400, 1, 1)]).await;
    let tt = fixture.ticket_type_id();
    setup.close().await;

    let client = reqwest::Client::new();
    let url = format!("{}/api/v1/orders", server.base);
    let answered = Arc::new(AtomicUsize::new(0));
    let rush = {
        let answered = answered.clone();
        tokio::spawn(
            futures::stream::iter(0..600)
                .map(move |i| {
                    let (client, url, answered) = (client.clone(), url.clone(), answered.clone());
                    async move {
                        let outcome = buy_until_answered(&client, &url, tt, i).await;
                        answered.fetch_add(1, Ordering::Relaxed);
                        outcome
                    }
                })
                .buffer_unordered(24)
                .collect::<Vec<_>>(),
        )
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while answered.load(Ordering::Relaxed) < 150 {
        assert!(Instant::now() < deadline, "the rush did not get going");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // pg_ctl blocks: on a thread of its own, so that the buyers go on.
    let restarted_at = Instant::now();
    let _postgres = tokio::task::spawn_blocking(move || {
        postgres.restart();
        postgres
    })
    .await
    .unwrap();
    let restart_took = restarted_at.elapsed();
    let outcomes = rush.await.unwrap();
    let unavailable: Vec<Instant> = outcomes
        .iter()
        .flat_map(|o| o.unavailable.clone())
        .collect();
    let window = unavailable.iter().max().map_or(Duration::ZERO, |last| {
        last.saturating_duration_since(restarted_at)
    });
    let mut latencies: Vec<Duration> = outcomes.iter().flat_map(|o| o.latencies.clone()).collect();
    latencies.sort();
    eprintln!(
        "Postgres restarted behind PgBouncer mid-rush (the restart took {restart_took:?}): \
         {} attempts answered 503 or cut, the last {window:?} after the restart began; \
         p99 of all {} attempts {:?}",
        unavailable.len(),
        latencies.len(),
        latencies[latencies.len() * 99 / 100]
    );

    let setup = pool(direct.clone(), 2).await;
    let committed: Vec<(String, Uuid)> = sqlx::query_as(
        "SELECT email, id FROM orders WHERE ticket_type_id = $1 AND status = 'confirmed'",
    )
    .bind(tt)
    .fetch_all(&setup)
    .await
    .unwrap();
    let committed: std::collections::BTreeMap<String, String> = committed
        .into_iter()
        .map(|(email, id)| (email, id.to_string()))
        .collect();
    let answered: std::collections::BTreeMap<String, String> = outcomes
        .into_iter()
        .filter_map(|o| Some((o.email, o.order?)))
        .collect();
    assert_eq!(answered, committed, "answered and committed orders differ");
    assert_eq!(committed.len(), 400, "the rush sold out");
    assert_invariants(&setup).await;
}

struct Bought {
    email: String,
    order: Option<String>,
    /// When each 503 or lost connection came.
    unavailable: Vec<Instant>,
    latencies: Vec<Duration>,
}

/// One buyer with one key, retrying after a 503 or a lost connection
/// until answered; a 500 (or any other answer) fails the test.
async fn buy_until_answered(client: &reqwest::Client, url: &str, tt: Uuid, i: usize) -> Bought {
    let (email, key) = (format!("restart{i}@example.org"), fresh_key());
    let (mut unavailable, mut latencies) = (Vec::new(), Vec::new());
    for _ in 0..300 {
        let started = Instant::now();
        let response = client
            .post(url)
            .json(&json!({
                "ticket_type_id": tt, "quantity": 1, "email": email, "idempotency_key": key,
            }))
            .timeout(Duration::from_secs(20))
            .send()
            .await;
        latencies.push(started.elapsed());
        match response.as_ref().map(|r| r.status().as_u16()) {
            Ok(200 | 201) => {
                let body: serde_json::Value = response.unwrap().json().await.unwrap();
                let order = body["id"].as_str().unwrap().to_owned();
                return Bought {
                    email,
                    order: Some(order),
                    unavailable,
                    latencies,
                };
            }
            Ok(409) => {
                return Bought {
                    email,
                    order: None,
                    unavailable,
                    latencies,
                };
            }
            Ok(503) => {
                let retry_after = response.as_ref().unwrap().headers().get("retry-after");
                assert!(retry_after.is_some(), "a 503 without Retry-After");
                unavailable.push(Instant::now());
            }
            Ok(status) => panic!("{email}: answered {status} while Postgres restarted"),
            Err(_) => unavailable.push(Instant::now()),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{email} got no answer in 300 attempts");
}
