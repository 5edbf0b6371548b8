//! The races every sale strategy must win (issue 8), with or without the
//! Redis gate in front (issue 9): `tests/strategies.rs` runs each against
//! every strategy, `tests/gate_cluster.rs` behind a gate on a Redis
//! Cluster. Each scenario makes its own ticket type and checks only it
//! (and the invariants of all), so scenarios may share a database.

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use rand::{Rng, SeedableRng, rngs::StdRng};
use sqlx::{PgPool, postgres::PgConnectOptions};
use stampede::{
    error::AppError,
    sale::{EngineSettings, GateRedis, GateSettings, Purchase, PurchaseRequest, Sales, Strategy},
};
use tokio::sync::Barrier;
use uuid::Uuid;

use super::{
    Fixture, TicketSpec, assert_invariants, now, pool, published_event,
    purchase::{fresh_key, request},
    remaining, sold,
};

/// Orders of one ticket type, whatever their status.
pub async fn orders_of(pool: &PgPool, ticket_type_id: Uuid) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM orders WHERE ticket_type_id = $1")
        .bind(ticket_type_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

pub fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// Where the Redis gate (issue 9) in front of a strategy counts.
#[derive(Debug, Clone)]
pub enum GateAt {
    Off,
    /// The local Redis (`REDIS_URL`).
    Shared,
    /// A Redis Cluster, by its nodes (`host:port`).
    Cluster(Vec<String>),
}

/// A strategy, with or without the Redis gate in front.
#[derive(Debug, Clone)]
pub struct Setup {
    pub strategy: Strategy,
    pub gate: GateAt,
}

impl From<Strategy> for Setup {
    fn from(strategy: Strategy) -> Self {
        Self {
            strategy,
            gate: GateAt::Off,
        }
    }
}

impl std::fmt::Display for Setup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let gate = match self.gate {
            GateAt::Off => "",
            GateAt::Shared => " behind the gate",
            GateAt::Cluster(_) => " behind the gate on a Redis Cluster",
        };
        write!(f, "{}{gate}", self.strategy)
    }
}

/// An engine of `strategy`; the Redis baselines and the gate on the local
/// Redis (the gate's keys are per ticket type, fresh in every test).
pub fn engine(pool: &PgPool, setup: &Setup) -> Sales {
    let mut sales = Sales::new(pool.clone(), setup.strategy, EngineSettings::default());
    if setup.strategy.needs_redis() {
        sales = sales.with_redis(&redis_url()).unwrap();
    }
    let redis = match &setup.gate {
        GateAt::Off => None,
        GateAt::Shared => Some(GateRedis::Server(redis_url())),
        GateAt::Cluster(nodes) => Some(GateRedis::Cluster(nodes.clone())),
    };
    if let Some(redis) = redis {
        let settings = GateSettings {
            prefix: "stampede:test:strategies:".into(),
            // Generous: a thousand tasks on one test thread, on a busy box
            // (a slower answer is a fallback to Postgres, also correct).
            timeout: Duration::from_secs(1),
            ..GateSettings::default()
        };
        sales = sales.with_gate(redis, settings).unwrap();
    }
    sales
}

pub async fn rush(connect: PgConnectOptions, spec: TicketSpec) -> (PgPool, Fixture) {
    let pool = pool(connect, 32).await;
    let fixture = published_event(&pool, &[spec]).await;
    (pool, fixture)
}

/// Every request at once (released together by a barrier), through `sales`.
pub async fn race(
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
pub async fn assert_answers_match_orders(
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
pub async fn seed_000(connect: PgConnectOptions, strategy: Setup) {
    let (pool, fixture) = rush(connect, TicketSpec::new(10, 4, 4)).await;
    let tt = fixture.ticket_type_id();
    let sales = engine(&pool, &strategy);
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
pub async fn seed_001(connect: PgConnectOptions, strategy: Setup) {
    let (pool, fixture) = rush(connect, TicketSpec::new(100, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let sales = engine(&pool, &strategy);
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
        // on to Postgres. Rebuilds wait for the purchases in flight (a
        // rebuild under them let as many again by); a rebuild after the
        // gate tripped on timeouts of a loaded box does not wait.
        let admitted = gate.admitted();
        assert!(
            (100..=200).contains(&admitted),
            "{admitted} of 10,000 admitted"
        );
    }
}

/// The same buyer and key twenty times at once: one order, and every
/// answer names it.
pub async fn same_key_raced(connect: PgConnectOptions, strategy: Setup) {
    let (pool, fixture) = rush(connect, TicketSpec::new(50, 4, 4)).await;
    let tt = fixture.ticket_type_id();
    let sales = engine(&pool, &strategy);
    let key = fresh_key();
    let requests = (0..20)
        .map(|_| request(tt, 2, "ada@example.org", &key))
        .collect();
    let results = race(&sales, requests).await;
    assert_invariants(&pool).await;
    assert_eq!(orders_of(&pool, tt).await, 1, "{strategy}");
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
pub async fn one_buyer_raced(connect: PgConnectOptions, strategy: Setup) {
    let (pool, fixture) = rush(connect, TicketSpec::new(100, 1, 4)).await;
    let tt = fixture.ticket_type_id();
    let sales = engine(&pool, &strategy);
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

/// Purchases that a pre-check let through but Postgres refused (the
/// buyer's limit, which the Redis baselines do not check) give their
/// reservations back, and a sale keeps its own: after one buyer's refused
/// retries the last ticket still sells to the next buyer.
pub async fn refused_retries_leave_the_last_ticket_on_sale(
    connect: PgConnectOptions,
    strategy: Setup,
) {
    let (pool, fixture) = rush(connect, TicketSpec::new(2, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let sales = engine(&pool, &strategy);
    let first = sales
        .purchase(now(), &request(tt, 1, "ada@example.org", &fresh_key()))
        .await;
    assert!(
        matches!(first, Ok(Purchase::Created { .. })),
        "{strategy}: {first:?}"
    );
    for _ in 0..3 {
        let again = sales
            .purchase(now(), &request(tt, 1, "ada@example.org", &fresh_key()))
            .await;
        assert!(
            matches!(again, Err(AppError::BuyerLimit { max: 1 })),
            "{strategy}: {again:?}"
        );
    }
    let last = sales
        .purchase(now(), &request(tt, 1, "bob@example.org", &fresh_key()))
        .await;
    assert!(
        matches!(last, Ok(Purchase::Created { .. })),
        "{strategy}: {last:?}"
    );
    assert_eq!(sold(&pool, tt).await, 2, "{strategy}");
    assert_invariants(&pool).await;
}

/// Two instances (two engines, two pools) selling one ticket type.
pub async fn two_instances(connect: PgConnectOptions, strategy: Setup) {
    let (pool, fixture) = rush(connect.clone(), TicketSpec::new(60, 2, 2)).await;
    let other_pool = super::pool(connect, 16).await;
    let tt = fixture.ticket_type_id();
    let one = engine(&pool, &strategy);
    let two = engine(&other_pool, &strategy);
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
