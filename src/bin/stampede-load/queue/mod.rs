//! `stampede-load queue MODE`: the waiting room's benchmarks (issue 12),
//! against a running server, over loopback, bounded in count and time.
//!
//! - `joins`: queue joins per second (each: GET a challenge, solve it, POST
//!   the join), into an open pre-queue.
//! - `positions`: position-page views per second (`GET /events/{id}/queue`
//!   with the entry cookie) with `--joiners` waiting, then the trivial route
//!   (the JSON 404) for as long, on the same connections.
//! - `onsale`: `--joiners` join the pre-queue, the sale opens, each polls
//!   its place every 5-9 s (as the page's meta refresh does) and buys one
//!   ticket as soon as it is admitted, until the `--tickets` are sold out.
//!   Reported from the tables: the time to sell out, admissions per second,
//!   and that every order spent a pass of an admitted entry, inside its
//!   validity (purchases without a pass are tried during the rush too).
//!
//! Each joiner connects from a loopback address of its own (127.1.x.y, 8
//! joiners an address, within the server's default cap per address); the
//! server's other per-address limits must be off (scripts/bench-queue
//! starts it so). It
//! sets the event up and moves its opening with plain SQL.
//!
//! The event, joining and the shared plumbing are here; the benchmarks in
//! throughput.rs (`joins`, `positions`) and onsale.rs.

mod onsale;
mod throughput;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context;
use rand::Rng;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::{
    cli::{QueueArgs, QueueMode},
    http::{Conn, Request, Target},
};

use onsale::onsale;
use throughput::{joins, positions};

const TIMEOUT: Duration = Duration::from_secs(10);
pub(super) const TRIVIAL_PATH: &str = "/api/v1/stampede-load-trivial";

pub fn main(args: &QueueArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads.max(1))
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let report = runtime.block_on(run(args))?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    if report.get("ok") == Some(&Value::Bool(false)) {
        anyhow::bail!("the check failed (see the report)");
    }
    Ok(())
}

async fn run(args: &QueueArgs) -> anyhow::Result<Value> {
    let target = Target::parse(&args.url)?;
    let db = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(
            args.database_url
                .as_deref()
                .context("--database-url (or DATABASE_URL) is needed")?,
        )
        .await
        .context("connecting to Postgres")?;
    match args.mode {
        QueueMode::Joins => joins(args, &target, &db).await,
        QueueMode::Positions => positions(args, &target, &db).await,
        QueueMode::Onsale => onsale(args, &target, &db).await,
    }
}

/// The event: one ticket type (one ticket per buyer), a room switched on.
pub(super) struct Room {
    pub(super) event_id: Uuid,
    pub(super) ticket_type_id: Uuid,
}

pub(super) async fn create_room(
    db: &PgPool,
    opens_in: &str,
    tickets: i32,
    admit_per_minute: i32,
    paused: bool,
) -> anyhow::Result<Room> {
    let tag = crate::setup::run_tag();
    let mut tx = db.begin().await?;
    let organizer: Uuid = sqlx::query_scalar(
        "INSERT INTO organizers (email, password_hash) VALUES ($1, 'stampede-load: no password') RETURNING id",
    )
    .bind(format!("organizer-{tag}@load.example.org"))
    .fetch_one(&mut *tx)
    .await?;
    let event_id: Uuid = sqlx::query_scalar(
        "INSERT INTO events (organizer_id, title, description, venue, starts_at, sale_opens_at, status)
         VALUES ($1, $2, 'Played by stampede-load queue.', 'Loopback Arena',
                 now() + interval '30 days', now() + $3::interval, 'published') RETURNING id",
    )
    .bind(organizer)
    .bind(format!("Stampede load queue {tag}"))
    .bind(opens_in)
    .fetch_one(&mut *tx)
    .await?;
    let ticket_type_id: Uuid = sqlx::query_scalar(
        "INSERT INTO ticket_types (event_id, position, name, price_minor, currency, capacity, remaining,
                                   max_per_order, max_per_buyer)
         VALUES ($1, 0, 'Standing', 2500, 'EUR', $2, $2, 1, 1) RETURNING id",
    )
    .bind(event_id)
    .bind(tickets)
    .fetch_one(&mut *tx)
    .await?;
    let seed: [u8; 32] = rand::rng().random();
    sqlx::query(
        "INSERT INTO waiting_rooms (event_id, enabled, prequeue_minutes, admit_per_minute, pass_minutes, paused, seed)
         VALUES ($1, true, 1440, $2, 10, $3, $4)",
    )
    .bind(event_id)
    .bind(admit_per_minute)
    .bind(paused)
    .bind(&seed[..])
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Room {
        event_id,
        ticket_type_id,
    })
}

pub(super) async fn send(
    conn: &mut Conn,
    method: &'static str,
    path: &str,
    headers: &[(&'static str, &str)],
    body: &[u8],
) -> Option<(u16, Vec<u8>)> {
    let reply = conn
        .send(
            &Request {
                method,
                path,
                headers,
                body,
            },
            TIMEOUT,
        )
        .await
        .ok()?;
    Some((reply.status, reply.body.to_vec()))
}

/// Join: a challenge, solved, then the POST. The entry token, or the status.
pub(super) async fn join(conn: &mut Conn, event_id: Uuid) -> Result<String, u16> {
    let path = format!("/api/v1/events/{event_id}/queue/challenge");
    let (status, body) = send(conn, "GET", &path, &[], &[]).await.ok_or(0_u16)?;
    if status != 200 {
        return Err(status);
    }
    let challenge: Value = serde_json::from_slice(&body).map_err(|_| 1_u16)?;
    let token = challenge["challenge"].as_str().ok_or(1_u16)?;
    let bits = challenge["difficulty_bits"].as_u64().ok_or(1_u16)?;
    let proof = stampede::waiting_room::solve(token, u32::try_from(bits).map_err(|_| 1_u16)?);
    let body = json!({ "proof": proof }).to_string();
    let path = format!("/api/v1/events/{event_id}/queue");
    let (status, body) = send(
        conn,
        "POST",
        &path,
        &[("content-type", "application/json")],
        body.as_bytes(),
    )
    .await
    .ok_or(0_u16)?;
    if status != 201 {
        return Err(status);
    }
    let joined: Value = serde_json::from_slice(&body).map_err(|_| 1_u16)?;
    joined["token"].as_str().map(str::to_owned).ok_or(1_u16)
}

/// Joiners per client address: within the server's default cap (10).
const JOINS_PER_ADDRESS: usize = 8;

/// 127.1.0.0 and up: loopback addresses (all of 127.0.0.0/8 is local).
pub(super) fn joiner_address(i: usize) -> std::net::IpAddr {
    let a = (i / JOINS_PER_ADDRESS) as u32;
    std::net::IpAddr::V4(std::net::Ipv4Addr::from(0x7f01_0000_u32 + a % 65_000 + 1))
}

/// `n` joins over `concurrency` connections (or until `until`): the tokens.
pub(super) async fn join_many(
    target: &Target,
    event_id: Uuid,
    n: usize,
    concurrency: usize,
    until: Option<Instant>,
) -> (Vec<String>, Vec<u16>) {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (next, target) = (next.clone(), target.clone());
        tasks.push(tokio::spawn(async move {
            let (mut tokens, mut failed) = (Vec::new(), Vec::new());
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n || until.is_some_and(|until| Instant::now() >= until) {
                    break;
                }
                // Each joiner is a browser of its own: a new connection,
                // from an address of its own (JOINS_PER_ADDRESS share one,
                // within the server's default cap per address).
                let mut conn = Conn::from_address(target.clone(), joiner_address(i));
                match join(&mut conn, event_id).await {
                    Ok(token) => tokens.push(token),
                    Err(status) => failed.push(status),
                }
            }
            (tokens, failed)
        }));
    }
    let (mut tokens, mut failed) = (Vec::new(), Vec::new());
    for task in tasks {
        if let Ok((t, f)) = task.await {
            tokens.extend(t);
            failed.extend(f);
        }
    }
    (tokens, failed)
}

pub(super) async fn entries(db: &PgPool, event_id: Uuid) -> anyhow::Result<i64> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM queue_entries WHERE event_id = $1")
            .bind(event_id)
            .fetch_one(db)
            .await?,
    )
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}
