//! Shared test harness: spawn the real app on a random port, create events
//! through the library, and check the invariants straight from the tables.
#![allow(dead_code)] // each test binary uses a different subset

pub mod amqp;
pub mod checkin;
pub mod cluster;
pub mod forms;
pub mod gate;
pub mod holds;
pub mod locks;
pub mod mailed_link;
pub mod organizer;
pub mod process;
pub mod purchase;
pub mod races;
pub mod redis_servers;
pub mod smtp;

pub use forms::{csrf_cookie, form_body};

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
    let new = input.parse().expect("valid fixture event");
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
        starts_at: stampede::web::views::datetime_local(detail.event.starts_at),
        sale_opens_at: stampede::web::views::datetime_local(detail.event.sale_opens_at),
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
        &input.parse().unwrap(),
        now(),
    )
    .await
}

/// The sale invariants, from the tables, for every ticket type (see the
/// docs/development.md): stock adds up, no limit is exceeded, one order per key.
/// Returns the number of tickets sold per ticket type, in id order.
pub async fn assert_invariants(pool: &PgPool) -> Vec<(Uuid, i64)> {
    let rows: Vec<(Uuid, i32, i32, i32, i32, i64)> = sqlx::query_as(
        "SELECT t.id, t.capacity, t.remaining, t.max_per_order, t.max_per_buyer,
                COALESCE((SELECT SUM(o.quantity) FROM orders o
                          WHERE o.ticket_type_id = t.id AND o.status IN ('held', 'confirmed')), 0)::int8
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
        // Buyers are counted by their folded key (orders from before keys
        // existed: by their email).
        let over_buyer: Vec<(String, i64)> = sqlx::query_as(
            "SELECT COALESCE(buyer_key, email), SUM(quantity)::int8 FROM orders
             WHERE ticket_type_id = $1 AND status IN ('held', 'confirmed')
             GROUP BY COALESCE(buyer_key, email) HAVING SUM(quantity) > $2",
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
            "SELECT COALESCE(h.buyer_key, o.buyer_key), COALESCE(h.quantity, 0)::int8,
                    COALESCE(o.live, 0)::int8
             FROM (SELECT buyer_key, quantity FROM buyer_holdings WHERE ticket_type_id = $1) h
             FULL JOIN (SELECT COALESCE(buyer_key, email) AS buyer_key, SUM(quantity) AS live
                        FROM orders WHERE ticket_type_id = $1 AND status IN ('held', 'confirmed')
                        GROUP BY COALESCE(buyer_key, email)) o
               ON o.buyer_key = h.buyer_key
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
    // Per event, across its ticket types: the optional limit per buyer key
    // holds, and the bookkeeping agrees with the orders.
    let over_event: Vec<(Uuid, String, i64)> = sqlx::query_as(
        "SELECT t.event_id, COALESCE(o.buyer_key, o.email), SUM(o.quantity)::int8
         FROM orders o JOIN ticket_types t ON t.id = o.ticket_type_id
         JOIN events e ON e.id = t.event_id
         WHERE o.status IN ('held', 'confirmed') AND e.max_per_buyer IS NOT NULL
         GROUP BY t.event_id, COALESCE(o.buyer_key, o.email), e.max_per_buyer
         HAVING SUM(o.quantity) > e.max_per_buyer",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(
        over_event.is_empty(),
        "buyers above an event's limit: {over_event:?}"
    );
    let event_drift: Vec<(Uuid, String, i64, i64)> = sqlx::query_as(
        "SELECT COALESCE(h.event_id, o.event_id), COALESCE(h.buyer_key, o.buyer_key),
                COALESCE(h.quantity, 0)::int8, COALESCE(o.live, 0)::int8
         FROM event_buyer_holdings h
         FULL JOIN (SELECT t.event_id, COALESCE(o.buyer_key, o.email) AS buyer_key,
                           SUM(o.quantity) AS live
                    FROM orders o JOIN ticket_types t ON t.id = o.ticket_type_id
                    WHERE o.status IN ('held', 'confirmed')
                    GROUP BY t.event_id, COALESCE(o.buyer_key, o.email)) o
           ON o.event_id = h.event_id AND o.buyer_key = h.buyer_key
         WHERE COALESCE(h.quantity, 0) <> COALESCE(o.live, 0)",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(
        event_drift.is_empty(),
        "event_buyer_holdings drifted: {event_drift:?}"
    );
    // Tickets exist for confirmed orders only, one per seat: a hold gets
    // none until its buyer confirms, and an expired hold never does.
    let wrong_tickets: Vec<(Uuid, String, i32, i64)> = sqlx::query_as(
        "SELECT o.id, o.status, o.quantity,
                (SELECT count(*) FROM tickets k WHERE k.order_id = o.id)
         FROM orders o
         WHERE ((o.status = 'held' OR o.cancel_reason = 'expired')
                AND EXISTS (SELECT 1 FROM tickets k WHERE k.order_id = o.id))
            OR (o.status = 'confirmed'
                AND (SELECT count(*) FROM tickets k WHERE k.order_id = o.id) <> o.quantity)",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(
        wrong_tickets.is_empty(),
        "orders with the wrong tickets: {wrong_tickets:?}"
    );
    // Each presale code's uses are the tickets of its live orders.
    let code_drift: Vec<(String, i32, i64)> = sqlx::query_as(
        "SELECT c.code, c.used,
                (SELECT coalesce(sum(o.quantity), 0) FROM orders o
                 WHERE o.presale_code_id = c.id AND o.status IN ('held', 'confirmed'))::int8
         FROM presale_codes c
         WHERE c.used <> (SELECT coalesce(sum(o.quantity), 0) FROM orders o
                          WHERE o.presale_code_id = c.id AND o.status IN ('held', 'confirmed'))",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(
        code_drift.is_empty(),
        "presale codes whose uses drifted: {code_drift:?}"
    );
    // A waiting list offer is one order, for its own buyer and ticket type,
    // and made only to a place that was in line (confirmed, with a position).
    let bad_offers: Vec<(Uuid, Option<Uuid>)> = sqlx::query_as(
        "SELECT w.id, w.order_id FROM waitlist_entries w
         LEFT JOIN orders o ON o.id = w.order_id
         WHERE (w.status = 'offered'
                AND (o.id IS NULL OR o.buyer_key <> w.buyer_key
                     OR o.ticket_type_id <> w.ticket_type_id OR w.position IS NULL
                     OR o.quantity > w.quantity OR o.confirm_token_hash <> w.token_hash))
            OR (w.status <> 'offered' AND w.order_id IS NOT NULL)
            OR w.order_id IN (SELECT order_id FROM waitlist_entries
                              GROUP BY order_id HAVING count(*) > 1)",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(
        bad_offers.is_empty(),
        "waiting list offers that do not match their orders: {bad_offers:?}"
    );
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

/// Serve the real router for `state` on a random loopback port, through
/// the server `stampede serve` uses.
pub async fn serve(state: AppState) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = stampede::app(state);
    tokio::spawn(stampede::server::serve(
        listener,
        app,
        stampede::server::ConnLimits::default(),
        std::future::pending(),
    ));
    addr
}

/// The real router served on a random loopback port.
pub struct TestApp {
    pub pool: PgPool,
    pub addr: SocketAddr,
    pub client: reqwest::Client,
    pub clock: ManualClock,
}

impl TestApp {
    pub async fn spawn(pool: PgPool) -> Self {
        Self::spawn_with_limits(pool, stampede::web::Limits::default()).await
    }

    /// For bursts from one loopback address: purchase rate limits per
    /// address off, as for a loopback benchmark.
    pub async fn spawn_for_bursts(pool: PgPool) -> Self {
        let mut limits = stampede::web::Limits::default();
        limits.purchase_rates.per_ip_burst = 0;
        limits.purchase_rates.per_email_burst = 0;
        Self::spawn_with_limits(pool, limits).await
    }

    pub async fn spawn_with_limits(pool: PgPool, limits: stampede::web::Limits) -> Self {
        let clock = ManualClock::new(now());
        // The public list's cache is off here, so that each test sees its
        // writes at once; tests/http/listing.rs turns it on.
        let state = AppState::new(pool.clone())
            .with_clock(clock.clone())
            .with_limits(limits)
            .with_list_cache_ttl(Duration::ZERO)
            .with_rooms(test_rooms(
                stampede::waiting_room::RoomKey::random(),
                stampede::waiting_room::DEFAULT_ENTRIES_PER_CLIENT,
            ));
        Self::spawn_state(pool, clock, state).await
    }

    /// The app for `state`, which must use `clock`.
    pub async fn spawn_state(pool: PgPool, clock: ManualClock, state: AppState) -> Self {
        let addr = serve(state).await;
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .pool_max_idle_per_host(256)
            .build()
            .unwrap();
        Self {
            pool,
            addr,
            client,
            clock,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// POST a form with a valid CSRF cookie and field.
    pub async fn post_form(&self, path: &str, fields: &[(&str, &str)]) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("cookie", csrf_cookie())
            .body(form_body(fields))
            .send()
            .await
            .unwrap()
    }

    /// Sign up an organizer through the real pages and return a client
    /// that carries its session (and CSRF) cookies, plus its API token.
    pub async fn organizer(&self, email: &str) -> Organizer {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .cookie_store(true)
            .build()
            .unwrap();
        let page = client.get(self.url("/signup")).send().await.unwrap();
        let token = csrf_from_page(&page.text().await.unwrap());
        let password = "correct horse battery staple";
        let body = forms::with_csrf(&[("email", email), ("password", password)], &token);
        let signed_up = client
            .post(self.url("/signup"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(signed_up.status(), 303, "sign-up of {email} failed");
        let pool = self.pool.clone();
        let id: Uuid = sqlx::query_scalar("SELECT id FROM organizers WHERE email = $1")
            .bind(email)
            .fetch_one(&pool)
            .await
            .unwrap();
        let api_token = stampede::auth::create_token(&pool, id.into(), "tests")
            .await
            .unwrap();
        Organizer {
            id,
            client,
            csrf: token,
            api_token,
            base: self.url(""),
        }
    }
}

/// Buy through the JSON API, expecting success; returns the order id.
pub async fn api_buy(app: &TestApp, ticket_type_id: Uuid, quantity: i64, email: &str) -> Uuid {
    api_buy_with_secret(app, ticket_type_id, quantity, email)
        .await
        .0
}

/// Buy through the JSON API, expecting success; returns the order id and the
/// cancel secret the creating answer carries.
pub async fn api_buy_with_secret(
    app: &TestApp,
    ticket_type_id: Uuid,
    quantity: i64,
    email: &str,
) -> (Uuid, String) {
    let resp = app
        .client
        .post(app.url("/api/v1/orders"))
        .json(&json!({
            "ticket_type_id": ticket_type_id,
            "quantity": quantity,
            "email": email,
            "idempotency_key": Uuid::new_v4().to_string(),
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), reqwest::StatusCode::CREATED);
    let body: Value = resp.json().await.unwrap();
    let id = Uuid::parse_str(body["id"].as_str().unwrap()).unwrap();
    (id, body["cancel_secret"].as_str().unwrap().to_owned())
}

/// A logged-in organizer: a cookie-carrying client and an API token.
pub struct Organizer {
    pub id: Uuid,
    pub client: reqwest::Client,
    pub csrf: String,
    pub api_token: String,
    base: String,
}

impl Organizer {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client.get(self.url(path)).send().await.unwrap()
    }

    /// POST a form from this organizer's browser, CSRF field included.
    pub async fn post_form(&self, path: &str, fields: &[(&str, &str)]) -> reqwest::Response {
        let body = forms::with_csrf(fields, &self.csrf);
        self.client
            .post(self.url(path))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap()
    }

    /// A JSON request with this organizer's bearer token.
    pub fn api(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.client
            .request(method, self.url(path))
            .bearer_auth(&self.api_token)
    }
}

/// The CSRF token a rendered page embeds in its forms.
pub fn csrf_from_page(html: &str) -> String {
    let marker = format!("name=\"{}\" value=\"", stampede::web::csrf::FIELD);
    let start = html.find(&marker).expect("page has a CSRF field") + marker.len();
    html[start..].split('"').next().unwrap().to_owned()
}

/// Wait until `n` backends of this database have run LISTEN, and a moment
/// more for what follows it (the gate rebuilds what it has seen).
pub async fn until_listening(pool: &PgPool, n: i64) {
    for _ in 0..500 {
        let listening: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND query LIKE 'LISTEN%'",
        )
        .fetch_one(pool)
        .await
        .unwrap();
        if listening >= n {
            tokio::time::sleep(Duration::from_millis(200)).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("fewer than {n} listeners ever started");
}
