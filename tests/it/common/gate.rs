//! The Redis gate in process, for the gate's test binaries: the engine
//! behind a gate on the shared Redis or on a Redis of the test's own.

use std::time::Duration;

use sqlx::{PgPool, postgres::PgConnectOptions};
use stampede::sale::{EngineSettings, GateRedis, GateSettings, Sales, Strategy};
use uuid::Uuid;

use super::{Fixture, TicketSpec, pool, published_event, redis_servers::OwnRedis};

pub const PREFIX: &str = "stampede:test:gate:";

pub fn gated(pool: &PgPool, url: &str, reconcile_every: Duration) -> Sales {
    let settings = GateSettings {
        prefix: PREFIX.into(),
        timeout: Duration::from_millis(500),
        reconcile_every,
        retry_after: Duration::from_millis(200),
        ..GateSettings::default()
    };
    gated_with(pool, url, settings)
}

pub fn gated_with(pool: &PgPool, url: &str, settings: GateSettings) -> Sales {
    Sales::new(pool.clone(), Strategy::Batch, EngineSettings::default())
        .with_gate(GateRedis::Server(url.into()), settings)
        .unwrap()
}

pub fn shared_redis() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

pub async fn setup(connect: PgConnectOptions, spec: TicketSpec) -> (PgPool, Fixture) {
    let pool = pool(connect, 16).await;
    let fixture = published_event(&pool, &[spec]).await;
    (pool, fixture)
}

/// A ticket type, a Redis server of the test's own, and the engine behind a
/// gate on it.
pub async fn own_gate(
    connect: PgConnectOptions,
    spec: TicketSpec,
    reconcile_every: Duration,
) -> (PgPool, Uuid, OwnRedis, Sales) {
    let (pool, fixture) = setup(connect, spec).await;
    let own = OwnRedis::start();
    own.until_up().await;
    let sales = gated(&pool, &own.url(), reconcile_every);
    (pool, fixture.ticket_type_id(), own, sales)
}
