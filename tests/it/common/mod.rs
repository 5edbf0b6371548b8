//! Shared test harness: spawn the real app on a random port, create events
//! through the library, and check the invariants straight from the tables.
#![allow(dead_code)] // each test binary uses a different subset

mod app;
mod invariants;

pub mod amqp;
pub mod checkin;
pub mod cluster;
pub mod forms;
pub mod gate;
pub mod haproxy;
pub mod holds;
pub mod localstripe;
pub mod locks;
pub mod logs;
pub mod mailed_link;
pub mod organizer;
pub mod pgbouncer;
pub mod private_postgres;
pub mod process;
pub mod purchase;
pub mod rabbitmq_node;
pub mod races;
pub mod redis_servers;
pub mod smtp;

// Re-exported where the tests have always found them; as with dead code,
// each test binary uses a different subset.
#[allow(unused_imports)]
pub use app::{
    Organizer, TestApp, api_buy, api_buy_with_secret, csrf_from_page, scrape_metrics, serve,
    serve_metrics, until_listening,
};
pub use forms::{csrf_cookie, form_body};
#[allow(unused_imports)]
pub use invariants::assert_invariants;

use std::{net::SocketAddr, time::Duration};

use serde_json::{Value, json};
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
use time::{Duration as Span, OffsetDateTime, macros::format_description};
use uuid::Uuid;

/// The waiting room's proof of work in tests: 2^4 hashes, not 2^18.
pub const TEST_PROOF_BITS: u32 = 4;

/// Rooms for tests: the cap per address as given, an easy proof of work.
pub fn test_rooms(
    key: stampede::waiting_room::RoomKey,
    entries_per_client: u32,
) -> stampede::waiting_room::Rooms {
    stampede::waiting_room::Rooms::new(key, entries_per_client).with_proof_bits(TEST_PROOF_BITS)
}

/// A solved challenge for joining `event_id`'s queue, as a client would
/// send it.
pub fn proof(
    rooms: &stampede::waiting_room::Rooms,
    event_id: stampede::domain::EventId,
    at: OffsetDateTime,
) -> String {
    let challenge = rooms.challenge(event_id, at);
    stampede::waiting_room::solve(&challenge.token, challenge.bits)
}

/// The current time: fixture events open their sale an hour before it.
pub fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

/// "2027-03-01T19:30", the way the organizer form (a `datetime-local`
/// input) sends times.
pub fn form_time(t: OffsetDateTime) -> String {
    t.format(format_description!("[year]-[month]-[day]T[hour]:[minute]"))
        .unwrap()
}

/// The URL of the database `sqlx::test` made for a test, for processes
/// that connect on their own (the `stampede` binary).
pub fn database_url(connect: &PgConnectOptions) -> String {
    format!(
        "postgres://{}@{}:{}/{}",
        connect.get_username(),
        connect.get_host(),
        connect.get_port(),
        connect.get_database().expect("sqlx::test names a database")
    )
}

/// A free loopback port, for a server a test starts.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
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
    pub organizer_id: Uuid,
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
        max_per_buyer: String::new(),
        hold_minutes: String::new(),
        pay_minutes: String::new(),
        // The fixtures' prices are collected at the door: their orders are
        // confirmed at once (the payment tests choose Stripe).
        payment: "offline".into(),
        time_zone: String::new(),
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
                hidden: false,
            })
            .collect(),
    };
    let new = input
        .parse(&stampede::domain::Zone::utc())
        .expect("valid fixture event");
    let organizer_id = fixture_organizer(pool).await;
    let event_id = db::events::create(pool, organizer_id.into(), &Default::default(), &new)
        .await
        .expect("create event");
    let detail = db::events::find(pool, event_id).await.unwrap().unwrap();
    Fixture {
        organizer_id,
        event_id: event_id.get(),
        ticket_type_ids: detail.ticket_types.iter().map(|t| t.id.get()).collect(),
    }
}

/// An organizer who owns fixture events. Its password hash matches no
/// password: tests that log in use [`TestApp::organizer`] instead.
pub async fn fixture_organizer(pool: &PgPool) -> Uuid {
    sqlx::query_scalar(
        "INSERT INTO organizers (email, password_hash) VALUES ($1, 'not-a-hash') RETURNING id",
    )
    .bind(format!("owner-{}@example.org", Uuid::new_v4()))
    .fetch_one(pool)
    .await
    .unwrap()
}

/// The organizer's edit of the one ticket type (max 1 per order and buyer),
/// setting its capacity, through the code the edit page uses.
pub async fn set_capacity(
    pool: &PgPool,
    fixture: &Fixture,
    capacity: i32,
) -> Result<(), stampede::error::AppError> {
    let detail = db::events::find(pool, fixture.event_id.into())
        .await
        .unwrap()
        .unwrap();
    let mut input = EventInput {
        title: detail.event.title.clone(),
        description: detail.event.description.clone(),
        venue: detail.event.venue.clone(),
        starts_at: detail.event.zone.input_value(detail.event.starts_at),
        sale_opens_at: detail.event.zone.input_value(detail.event.sale_opens_at),
        time_zone: detail.event.zone.name().to_owned(),
        payment: "offline".into(),
        ..Default::default()
    };
    let tt = &detail.ticket_types[0];
    input.ticket_types.push(TicketTypeInput {
        id: Some(tt.id),
        name: tt.name.clone(),
        price: "25.00".into(),
        currency: "EUR".into(),
        capacity: capacity.to_string(),
        max_per_order: "1".into(),
        max_per_buyer: "1".into(),
        price_is_minor: false,
        hidden: false,
    });
    db::events::update(
        pool,
        fixture.organizer_id.into(),
        &Default::default(),
        detail.event.id,
        &input.parse(&detail.event.zone).unwrap(),
        now(),
    )
    .await
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

/// The one value that `select` (a query of one row by the id in `$1`) reads.
pub async fn scalar<T>(pool: &PgPool, select: &str, id: Uuid) -> T
where
    T: for<'r> sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres> + Send + Unpin,
{
    sqlx::query_scalar(select)
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

pub async fn remaining(pool: &PgPool, ticket_type_id: Uuid) -> i32 {
    scalar(
        pool,
        "SELECT remaining FROM ticket_types WHERE id = $1",
        ticket_type_id,
    )
    .await
}

pub async fn capacity_and_remaining(pool: &PgPool, ticket_type_id: Uuid) -> (i32, i32) {
    sqlx::query_as("SELECT capacity, remaining FROM ticket_types WHERE id = $1")
        .bind(ticket_type_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

pub async fn order_status(pool: &PgPool, order_id: Uuid) -> String {
    scalar(pool, "SELECT status FROM orders WHERE id = $1", order_id).await
}

pub async fn event_status(pool: &PgPool, event_id: Uuid) -> String {
    scalar(pool, "SELECT status FROM events WHERE id = $1", event_id).await
}

/// The ticket codes of an order, in position order.
pub async fn ticket_codes(pool: &PgPool, order_id: Uuid) -> Vec<String> {
    sqlx::query_scalar("SELECT code FROM tickets WHERE order_id = $1 ORDER BY position")
        .bind(order_id)
        .fetch_all(pool)
        .await
        .unwrap()
}

/// The `Location` header of a response (panics if there is none).
pub fn location(resp: &reqwest::Response) -> String {
    resp.headers()
        .get("location")
        .unwrap_or_else(|| panic!("no Location header on a {} response", resp.status()))
        .to_str()
        .unwrap()
        .to_owned()
}
