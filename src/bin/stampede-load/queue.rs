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

use std::{
    cmp::Reverse,
    collections::BinaryHeap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context;
use rand::Rng;
use serde_json::{Value, json};
use sqlx::{PgPool, Row};
use uuid::Uuid;

use crate::{
    cli::{QueueArgs, QueueMode},
    http::{Conn, Request, Target},
};

const TIMEOUT: Duration = Duration::from_secs(10);
const TRIVIAL_PATH: &str = "/api/v1/stampede-load-trivial";

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
struct Room {
    event_id: Uuid,
    ticket_type_id: Uuid,
}

async fn create_room(
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

async fn send(
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
async fn join(conn: &mut Conn, event_id: Uuid) -> Result<String, u16> {
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
fn joiner_address(i: usize) -> std::net::IpAddr {
    let a = (i / JOINS_PER_ADDRESS) as u32;
    std::net::IpAddr::V4(std::net::Ipv4Addr::from(0x7f01_0000_u32 + a % 65_000 + 1))
}

/// `n` joins over `concurrency` connections (or until `until`): the tokens.
async fn join_many(
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

async fn entries(db: &PgPool, event_id: Uuid) -> anyhow::Result<i64> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM queue_entries WHERE event_id = $1")
            .bind(event_id)
            .fetch_one(db)
            .await?,
    )
}

async fn joins(args: &QueueArgs, target: &Target, db: &PgPool) -> anyhow::Result<Value> {
    // The pre-queue is open; the sale is a day away: joins only.
    let room = create_room(db, "1 day", 10, 60, false).await?;
    let started = Instant::now();
    let until = started + Duration::from_secs_f64(args.duration);
    let (tokens, failed) = join_many(
        target,
        room.event_id,
        usize::MAX,
        args.concurrency,
        Some(until),
    )
    .await;
    let secs = started.elapsed().as_secs_f64();
    let stored = entries(db, room.event_id).await?;
    Ok(json!({
        "mode": "joins",
        "concurrency": args.concurrency,
        "seconds": round(secs),
        "joins": tokens.len(),
        "joins_per_sec": round(tokens.len() as f64 / secs),
        "failed": failed.len(),
        "entries_in_table": stored,
        "ok": failed.is_empty() && stored == tokens.len() as i64,
    }))
}

/// A GET to send: the path and its headers.
type Get = (String, Vec<(&'static str, String)>);

/// `duration` of GETs of `paths` (one picked at random per request, with
/// its headers) over `concurrency` connections: (ok, other, seconds).
async fn hammer(
    target: &Target,
    requests: Arc<Vec<Get>>,
    expect: u16,
    concurrency: usize,
    duration: Duration,
) -> (u64, u64, f64) {
    let ok = Arc::new(AtomicU64::new(0));
    let other = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let until = started + duration;
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (ok, other, target, requests) =
            (ok.clone(), other.clone(), target.clone(), requests.clone());
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::new(target);
            while Instant::now() < until {
                let (path, headers) = &requests[rand::rng().random_range(0..requests.len())];
                let headers: Vec<(&'static str, &str)> =
                    headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
                match send(&mut conn, "GET", path, &headers, &[]).await {
                    Some((status, _)) if status == expect => ok.fetch_add(1, Ordering::Relaxed),
                    _ => other.fetch_add(1, Ordering::Relaxed),
                };
            }
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    (
        ok.load(Ordering::Relaxed),
        other.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64(),
    )
}

async fn positions(args: &QueueArgs, target: &Target, db: &PgPool) -> anyhow::Result<Value> {
    // The sale opened an hour ago, admission paused: everyone waits, ranked
    // by the admitter's ticks.
    let room = create_room(db, "-1 hour", 10, 60, true).await?;
    let started = Instant::now();
    let (tokens, failed) =
        join_many(target, room.event_id, args.joiners, args.concurrency, None).await;
    let join_secs = started.elapsed().as_secs_f64();
    anyhow::ensure!(
        failed.is_empty(),
        "joins failed: {:?}",
        &failed[..failed.len().min(10)]
    );
    // Wait (bounded) for the admitter to rank every arrival.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let unranked: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM queue_entries WHERE event_id = $1 AND rank IS NULL",
        )
        .bind(room.event_id)
        .fetch_one(db)
        .await?;
        if unranked == 0 {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{unranked} entries still unranked"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let cookie = format!("stampede_q_{}", room.event_id.simple());
    let page = format!("/events/{}/queue", room.event_id);
    let requests: Vec<_> = tokens
        .iter()
        .map(|token| (page.clone(), vec![("cookie", format!("{cookie}={token}"))]))
        .collect();
    let duration = Duration::from_secs_f64(args.duration);
    let (pos_ok, pos_other, pos_secs) =
        hammer(target, Arc::new(requests), 200, args.concurrency, duration).await;
    let trivial = Arc::new(vec![(TRIVIAL_PATH.to_owned(), Vec::new())]);
    let (triv_ok, triv_other, triv_secs) =
        hammer(target, trivial, 404, args.concurrency, duration).await;
    let pos_rate = pos_ok as f64 / pos_secs;
    let triv_rate = triv_ok as f64 / triv_secs;
    Ok(json!({
        "mode": "positions",
        "concurrency": args.concurrency,
        "waiting": tokens.len(),
        "joins_per_sec_after_opening": round(tokens.len() as f64 / join_secs),
        "position_views": pos_ok,
        "position_other": pos_other,
        "position_views_per_sec": round(pos_rate),
        "trivial": triv_ok,
        "trivial_other": triv_other,
        "trivial_per_sec": round(triv_rate),
        "position_to_trivial": round(pos_rate / triv_rate),
        "ok": pos_other == 0 && triv_other == 0,
    }))
}

/// What the on-sale's clients saw.
#[derive(Default)]
struct Seen {
    polls: AtomicU64,
    bought: AtomicU64,
    sold_out: AtomicU64,
    refused: AtomicU64,
    without_pass_refused: AtomicU64,
    without_pass_sold: AtomicU64,
    errors: AtomicU64,
}

async fn onsale(args: &QueueArgs, target: &Target, db: &PgPool) -> anyhow::Result<Value> {
    let room = create_room(db, "12 hours", args.tickets, args.admit_per_minute, false).await?;
    let event_id = room.event_id;
    let started = Instant::now();
    let (tokens, failed) = join_many(target, event_id, args.joiners, args.concurrency, None).await;
    let join_secs = started.elapsed().as_secs_f64();
    anyhow::ensure!(
        failed.is_empty(),
        "joins failed: {:?}",
        &failed[..failed.len().min(10)]
    );
    // The opening, in three seconds (the servers' caches are a second old
    // at most).
    let opens_at: time::OffsetDateTime = sqlx::query_scalar(
        "UPDATE events SET sale_opens_at = now() + interval '3 seconds' WHERE id = $1 RETURNING sale_opens_at",
    )
    .bind(event_id)
    .fetch_one(db)
    .await?;
    let opening = Instant::now() + Duration::from_secs(3);
    let stop_at = opening + Duration::from_secs_f64(args.limit);

    // Each joiner's next poll: first within 7 s of the opening (pages
    // refresh at their own pace), then every 5-9 s.
    let heap: BinaryHeap<Reverse<(Instant, usize)>> = (0..tokens.len())
        .map(|i| {
            let offset = Duration::from_millis(rand::rng().random_range(0..7000));
            Reverse((opening + offset, i))
        })
        .collect();
    let heap = Arc::new(Mutex::new(heap));
    let tokens = Arc::new(tokens);
    let seen = Arc::new(Seen::default());
    let done = Arc::new(AtomicBool::new(false));
    let tag = crate::setup::run_tag();
    let mut tasks = Vec::new();
    for worker in 0..args.concurrency {
        let (heap, tokens, seen, done, target, tag) = (
            heap.clone(),
            tokens.clone(),
            seen.clone(),
            done.clone(),
            target.clone(),
            tag.clone(),
        );
        let tickets = u64::try_from(args.tickets).unwrap_or(0);
        let tt = room.ticket_type_id;
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::new(target);
            let mut ops = 0_u64;
            let path = format!("/api/v1/events/{event_id}/queue");
            while !done.load(Ordering::Relaxed) && Instant::now() < stop_at {
                let next = heap.lock().ok().and_then(|mut h| h.pop());
                let Some(Reverse((due, i))) = next else { break };
                let now = Instant::now();
                if due > now {
                    tokio::time::sleep(due - now).await;
                }
                ops += 1;
                // Now and then, a purchase without a pass: it must be refused.
                if ops % 50 == (worker as u64 % 50) {
                    let body = order_body(tt, &format!("nopass-{worker}-{ops}-{tag}"), None);
                    match send(
                        &mut conn,
                        "POST",
                        "/api/v1/orders",
                        &[("content-type", "application/json")],
                        body.as_bytes(),
                    )
                    .await
                    {
                        Some((403, _)) => seen.without_pass_refused.fetch_add(1, Ordering::Relaxed),
                        Some((201, _)) => seen.without_pass_sold.fetch_add(1, Ordering::Relaxed),
                        _ => seen.errors.fetch_add(1, Ordering::Relaxed),
                    };
                }
                seen.polls.fetch_add(1, Ordering::Relaxed);
                let token = tokens[i].as_str();
                let polled = send(
                    &mut conn,
                    "GET",
                    &path,
                    &[("stampede-queue-entry", token)],
                    &[],
                )
                .await;
                let position: Option<Value> = match polled {
                    Some((200, body)) => serde_json::from_slice(&body).ok(),
                    _ => None,
                };
                let Some(position) = position else {
                    seen.errors.fetch_add(1, Ordering::Relaxed);
                    requeue(&heap, i);
                    continue;
                };
                match (position["state"].as_str(), position["pass"].as_str()) {
                    (Some("admitted"), Some(pass)) => {
                        let body = order_body(tt, &format!("j{i}-{tag}"), Some(pass));
                        match send(
                            &mut conn,
                            "POST",
                            "/api/v1/orders",
                            &[("content-type", "application/json")],
                            body.as_bytes(),
                        )
                        .await
                        {
                            Some((201, _)) => {
                                if seen.bought.fetch_add(1, Ordering::Relaxed) + 1 >= tickets {
                                    done.store(true, Ordering::Relaxed);
                                }
                            }
                            Some((409, body))
                                if String::from_utf8_lossy(&body).contains("sold_out") =>
                            {
                                seen.sold_out.fetch_add(1, Ordering::Relaxed);
                                done.store(true, Ordering::Relaxed);
                            }
                            Some(_) => {
                                seen.refused.fetch_add(1, Ordering::Relaxed);
                            }
                            None => {
                                seen.errors.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    (Some("waiting"), _) => requeue(&heap, i),
                    _ => {}
                }
            }
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    let client_secs = opening.elapsed().as_secs_f64();
    let checked = check_onsale(db, &room, opens_at).await?;
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let ok = checked["ok"] == Value::Bool(true) && get(&seen.without_pass_sold) == 0;
    Ok(json!({
        "mode": "onsale",
        "joiners": tokens.len(),
        "tickets": args.tickets,
        "admit_per_minute": args.admit_per_minute,
        "concurrency": args.concurrency,
        "pre_queue_joins_per_sec": round(tokens.len() as f64 / join_secs),
        "seconds_from_opening_to_stop": round(client_secs),
        "position_polls": get(&seen.polls),
        "position_polls_per_sec": round(get(&seen.polls) as f64 / client_secs),
        "bought": get(&seen.bought),
        "sold_out_answers": get(&seen.sold_out),
        "other_refusals": get(&seen.refused),
        "purchases_without_pass_refused": get(&seen.without_pass_refused),
        "purchases_without_pass_sold": get(&seen.without_pass_sold),
        "errors": get(&seen.errors),
        "tables": checked,
        "ok": ok,
    }))
}

fn requeue(heap: &Mutex<BinaryHeap<Reverse<(Instant, usize)>>>, i: usize) {
    let next = Instant::now() + Duration::from_millis(rand::rng().random_range(5000..9000));
    if let Ok(mut heap) = heap.lock() {
        heap.push(Reverse((next, i)));
    }
}

fn order_body(ticket_type_id: Uuid, who: &str, pass: Option<&str>) -> String {
    let mut body = json!({
        "ticket_type_id": ticket_type_id,
        "quantity": 1,
        "email": format!("{who}@load.example.org"),
        "idempotency_key": Uuid::new_v4().to_string(),
    });
    if let Some(pass) = pass {
        body["pass"] = json!(pass);
    }
    body.to_string()
}

/// From the tables: sold, when, admissions per second, and that every order
/// spent a pass of an entry admitted before it, inside its validity.
async fn check_onsale(
    db: &PgPool,
    room: &Room,
    opens_at: time::OffsetDateTime,
) -> anyhow::Result<Value> {
    let row = sqlx::query(
        "SELECT t.capacity, t.remaining,
                count(o.id) AS orders,
                coalesce(sum(o.quantity), 0)::int8 AS sold,
                count(o.id) FILTER (WHERE o.queue_entry_id IS NULL) AS without_entry,
                count(o.id) FILTER (WHERE q.id IS NULL OR q.admitted_at IS NULL
                                      OR o.created_at < q.admitted_at
                                      OR o.created_at > q.pass_expires_at) AS without_valid_pass,
                count(DISTINCT o.queue_entry_id) AS entries_spent,
                extract(epoch FROM max(o.created_at) - $2)::float8 AS last_sale_secs
         FROM ticket_types t
         LEFT JOIN orders o ON o.ticket_type_id = t.id AND o.status = 'confirmed'
         LEFT JOIN queue_entries q ON q.id = o.queue_entry_id AND q.event_id = t.event_id
         WHERE t.id = $1
         GROUP BY t.capacity, t.remaining",
    )
    .bind(room.ticket_type_id)
    .bind(opens_at)
    .fetch_one(db)
    .await?;
    let capacity: i32 = row.get("capacity");
    let remaining: i32 = row.get("remaining");
    let orders: i64 = row.get("orders");
    let sold: i64 = row.get("sold");
    let without_entry: i64 = row.get("without_entry");
    let without_valid_pass: i64 = row.get("without_valid_pass");
    let entries_spent: i64 = row.get("entries_spent");
    let last_sale_secs: Option<f64> = row.get("last_sale_secs");
    // Admissions per whole second from the opening, up to the sell-out.
    let per_second: Vec<i64> = sqlx::query_scalar(
        "SELECT count(*) FROM queue_entries
         WHERE event_id = $1 AND admitted_at IS NOT NULL
           AND admitted_at <= (SELECT coalesce(max(created_at), now()) FROM orders WHERE ticket_type_id = $2)
         GROUP BY floor(extract(epoch FROM admitted_at - $3))
         ORDER BY floor(extract(epoch FROM admitted_at - $3))",
    )
    .bind(room.event_id)
    .bind(room.ticket_type_id)
    .bind(opens_at)
    .fetch_all(db)
    .await?;
    let admitted: i64 = per_second.iter().sum();
    // The first second starts at the opening, not at a tick, and the last
    // is cut by the sell-out: only the seconds between say how even it was.
    let full = if per_second.len() > 2 {
        &per_second[1..per_second.len() - 1]
    } else {
        &per_second[..]
    };
    let n = full.len().max(1) as f64;
    let mean = full.iter().sum::<i64>() as f64 / n;
    let var = full.iter().map(|c| (*c as f64 - mean).powi(2)).sum::<f64>() / n;
    let ok = sold == i64::from(capacity - remaining)
        && remaining >= 0
        && without_entry == 0
        && without_valid_pass == 0
        && entries_spent == orders;
    Ok(json!({
        "capacity": capacity,
        "remaining": remaining,
        "orders": orders,
        "sold": sold,
        "sold_out": remaining == 0,
        "seconds_from_opening_to_last_sale": last_sale_secs.map(round),
        "orders_without_queue_entry": without_entry,
        "orders_without_a_valid_pass": without_valid_pass,
        "entries_spent": entries_spent,
        "admitted_until_sell_out": admitted,
        "admissions_per_second": per_second,
        "admissions_per_full_second": {
            "mean": round(mean),
            "stddev": round(var.sqrt()),
            "min": full.iter().min(),
            "max": full.iter().max(),
            "cv": round(if mean > 0.0 { var.sqrt() / mean } else { 0.0 }),
        },
        "ok": ok,
    }))
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}
