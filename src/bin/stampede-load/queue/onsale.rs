//! `onsale`: a full on-sale through the waiting room, checked from the
//! tables.

use std::{
    cmp::Reverse,
    collections::BinaryHeap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use rand::Rng;
use serde_json::{Value, json};
use sqlx::{PgPool, Row};
use uuid::Uuid;

use super::{Room, create_room, join_many, round, send};
use crate::{
    cli::QueueArgs,
    http::{Conn, Target},
};

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

pub(super) async fn onsale(
    args: &QueueArgs,
    target: &Target,
    db: &PgPool,
) -> anyhow::Result<Value> {
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
