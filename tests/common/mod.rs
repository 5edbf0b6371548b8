//! Shared test harness: spawn the real app on a random port, create events
//! through the library, and check the invariants straight from the tables.
#![allow(dead_code)] // each test binary uses a different subset

use std::{net::SocketAddr, time::Duration};

use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use stampede::{
    AppState,
    clock::ManualClock,
    db,
    domain::{EventInput, TicketTypeInput},
};
use time::{Duration as Span, OffsetDateTime};
use uuid::Uuid;

/// A fixed "now" for tests: the sale of every fixture event is open.
pub fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

/// A pool big enough for real concurrency (sqlx::test's default is small).
pub async fn pool(connect: PgConnectOptions, max: u32) -> PgPool {
    PgPoolOptions::new()
        .max_connections(max)
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(connect)
        .await
        .expect("test pool")
}

#[derive(Debug, Clone)]
pub struct TicketSpec {
    pub name: &'static str,
    pub capacity: i64,
    pub max_per_order: i64,
    pub max_per_buyer: i64,
    pub price_minor: i64,
}

impl TicketSpec {
    pub fn new(capacity: i64, max_per_order: i64, max_per_buyer: i64) -> Self {
        Self {
            name: "General admission",
            capacity,
            max_per_order,
            max_per_buyer,
            price_minor: 2500,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Fixture {
    pub event_id: Uuid,
    pub ticket_type_ids: Vec<Uuid>,
}

impl Fixture {
    pub fn ticket_type_id(&self) -> Uuid {
        self.ticket_type_ids[0]
    }
}

/// A published event whose sale opened an hour ago, through the same
/// parsing and insert code the organizer pages use.
pub async fn published_event(pool: &PgPool, specs: &[TicketSpec]) -> Fixture {
    let opened = now() - Span::hours(1);
    event_with_window(pool, opened, None, "published", specs).await
}

pub async fn event_with_window(
    pool: &PgPool,
    opens: OffsetDateTime,
    closes: Option<OffsetDateTime>,
    status: &str,
    specs: &[TicketSpec],
) -> Fixture {
    let rfc = |t: OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    };
    let input = EventInput {
        title: "Test concert".into(),
        description: "A test event".into(),
        venue: "Test hall".into(),
        starts_at: rfc(opens + Span::days(30)),
        sale_opens_at: rfc(opens),
        sale_closes_at: closes.map(rfc).unwrap_or_default(),
        status: status.into(),
        ticket_types: specs
            .iter()
            .enumerate()
            .map(|(i, spec)| TicketTypeInput {
                id: None,
                name: format!("{} {i}", spec.name),
                price: spec.price_minor.to_string(),
                price_is_minor: true,
                currency: "EUR".into(),
                capacity: spec.capacity.to_string(),
                max_per_order: spec.max_per_order.to_string(),
                max_per_buyer: spec.max_per_buyer.to_string(),
            })
            .collect(),
    };
    let new = input.parse().expect("valid fixture event");
    let event_id = db::events::create(pool, &new).await.expect("create event");
    let detail = db::events::find(pool, event_id).await.unwrap().unwrap();
    Fixture {
        event_id,
        ticket_type_ids: detail.ticket_types.iter().map(|t| t.id).collect(),
    }
}

/// The invariants of DESIGN.md, from the tables, for every ticket type.
/// Returns the number of tickets sold per ticket type, in id order.
pub async fn assert_invariants(pool: &PgPool) -> Vec<(Uuid, i64)> {
    let rows: Vec<(Uuid, i32, i32, i32, i32, i64)> = sqlx::query_as(
        "SELECT t.id, t.capacity, t.remaining, t.max_per_order, t.max_per_buyer,
                COALESCE((SELECT SUM(o.quantity) FROM orders o
                          WHERE o.ticket_type_id = t.id AND o.status = 'confirmed'), 0)::int8
         FROM ticket_types t ORDER BY t.id",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let mut sold = Vec::new();
    for (id, capacity, remaining, max_per_order, max_per_buyer, live) in rows {
        assert!(
            remaining >= 0,
            "ticket type {id}: remaining {remaining} < 0"
        );
        assert_eq!(
            i64::from(capacity),
            i64::from(remaining) + live,
            "ticket type {id}: capacity != remaining + sold"
        );
        let over_order: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM orders WHERE ticket_type_id = $1 AND quantity > $2",
        )
        .bind(id)
        .bind(max_per_order)
        .fetch_one(pool)
        .await
        .unwrap();
        assert_eq!(
            over_order, 0,
            "ticket type {id}: an order above max_per_order"
        );
        let over_buyer: Vec<(String, i64)> = sqlx::query_as(
            "SELECT email, SUM(quantity)::int8 FROM orders
             WHERE ticket_type_id = $1 AND status = 'confirmed'
             GROUP BY email HAVING SUM(quantity) > $2",
        )
        .bind(id)
        .bind(max_per_buyer)
        .fetch_all(pool)
        .await
        .unwrap();
        assert!(
            over_buyer.is_empty(),
            "ticket type {id}: buyers above the limit: {over_buyer:?}"
        );
        // The per-buyer bookkeeping agrees with the orders it summarises.
        let drift: Vec<(String, i64, i64)> = sqlx::query_as(
            "SELECT COALESCE(h.email, o.email), COALESCE(h.quantity, 0)::int8, COALESCE(o.live, 0)::int8
             FROM (SELECT email, quantity FROM buyer_holdings WHERE ticket_type_id = $1) h
             FULL JOIN (SELECT email, SUM(quantity) AS live FROM orders
                        WHERE ticket_type_id = $1 AND status = 'confirmed' GROUP BY email) o
               ON o.email = h.email
             WHERE COALESCE(h.quantity, 0) <> COALESCE(o.live, 0)",
        )
        .bind(id)
        .fetch_all(pool)
        .await
        .unwrap();
        assert!(
            drift.is_empty(),
            "ticket type {id}: buyer_holdings drifted: {drift:?}"
        );
        sold.push((id, live));
    }
    let duplicate_keys: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT 1 FROM orders GROUP BY email, idempotency_key HAVING count(*) > 1) d",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(
        duplicate_keys, 0,
        "an idempotency key maps to more than one order"
    );
    sold
}

pub async fn sold(pool: &PgPool, ticket_type_id: Uuid) -> i64 {
    sqlx::query_scalar(
        "SELECT COALESCE(SUM(quantity), 0)::int8 FROM orders WHERE ticket_type_id = $1 AND status = 'confirmed'",
    )
    .bind(ticket_type_id)
    .fetch_one(pool)
    .await
    .unwrap()
}

pub async fn order_count(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM orders")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Confirmed order ids in the database.
pub async fn confirmed_order_ids(pool: &PgPool) -> std::collections::BTreeSet<Uuid> {
    sqlx::query_scalar::<_, Uuid>("SELECT id FROM orders WHERE status = 'confirmed'")
        .fetch_all(pool)
        .await
        .unwrap()
        .into_iter()
        .collect()
}

/// The real router served on a random loopback port.
pub struct TestApp {
    pub addr: SocketAddr,
    pub client: reqwest::Client,
    pub clock: ManualClock,
}

impl TestApp {
    pub async fn spawn(pool: PgPool) -> Self {
        let clock = ManualClock::new(now());
        let state = AppState::new(pool).with_clock(clock.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = stampede::app(state);
        tokio::spawn(async move {
            axum::serve(
                listener,
                app.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .await
            .unwrap();
        });
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .pool_max_idle_per_host(256)
            .build()
            .unwrap();
        Self {
            addr,
            client,
            clock,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}
