//! `joins` and `positions`: queue joins per second, then position views
//! per second against the trivial route.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use rand::Rng;
use serde_json::{Value, json};
use sqlx::PgPool;

use super::{TRIVIAL_PATH, create_room, entries, join_many, round, send};
use crate::{
    cli::QueueArgs,
    http::{Conn, Target},
};

pub(super) async fn joins(args: &QueueArgs, target: &Target, db: &PgPool) -> anyhow::Result<Value> {
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

pub(super) async fn positions(
    args: &QueueArgs,
    target: &Target,
    db: &PgPool,
) -> anyhow::Result<Value> {
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
    // A browser's first poll once ranked swaps its cookie for the token
    // that carries its rank; the views below are the polls after that.
    let tokens = ranked_tokens(target, room.event_id, tokens, args.concurrency).await;
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
        "event_id": room.event_id,
        // The furthest back: its polls are answered from the token (the
        // ranks nearest the front read their entry).
        "sample_token": tokens.iter().max_by_key(|token| {
            token.split('.').nth(1).and_then(|rank| rank.parse::<i64>().ok()).unwrap_or(0)
        }),
        "ok": pos_other == 0 && triv_other == 0,
    }))
}

/// Each token after one API poll: the ranked token it hands out, or the
/// token itself if it hands out none.
async fn ranked_tokens(
    target: &Target,
    event_id: uuid::Uuid,
    tokens: Vec<String>,
    concurrency: usize,
) -> Vec<String> {
    let path = format!("/api/v1/events/{event_id}/queue");
    let chunk = tokens.len().div_ceil(concurrency.max(1)).max(1);
    let tasks: Vec<_> = tokens
        .chunks(chunk)
        .map(|chunk| {
            let (chunk, target, path) = (chunk.to_vec(), target.clone(), path.clone());
            tokio::spawn(async move {
                let mut conn = Conn::new(target);
                let mut ranked = Vec::with_capacity(chunk.len());
                for token in chunk {
                    let header = [("stampede-queue-entry", token.as_str())];
                    let answer = send(&mut conn, "GET", &path, &header, &[]).await;
                    let new = answer
                        .and_then(|(_, body)| serde_json::from_slice::<Value>(&body).ok())
                        .and_then(|body| body["entry_token"].as_str().map(str::to_owned));
                    ranked.push(new.unwrap_or(token));
                }
                ranked
            })
        })
        .collect();
    let mut ranked = Vec::new();
    for task in tasks {
        ranked.extend(task.await.unwrap_or_default());
    }
    ranked
}
