//! The waiting room (issue 12) against real Postgres: the shuffle is a
//! permutation anyone can recompute from the revealed seed, later arrivals
//! queue in arrival order, every purchase of a queued event needs a valid,
//! unspent pass (refusals write nothing), and admission is one admitter at
//! a time, within the rate, replaced when it dies.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration as StdDuration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sqlx::{Connection, PgPool, postgres::PgConnection};
use stampede::{
    AppState,
    clock::{Clock as _, ManualClock},
    domain::{EventId, QueueEntryId},
    sale::{EngineSettings, Purchase, Sales, Strategy},
    waiting_room::{self, RoomKey, RoomSettings, Rooms},
};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

use common::{Fixture, TestApp, TicketSpec, event_with_window, now, order_count, published_event};

fn settings(per_minute: i32) -> RoomSettings {
    RoomSettings {
        enabled: true,
        admit_per_minute: Some(per_minute),
        ..RoomSettings::default()
    }
}

/// What the room's tables and the sale's hold, to show a refusal wrote nothing.
async fn written(pool: &PgPool) -> (i64, i64, i64, i64) {
    let count = |table: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(&format!("SELECT count(*) FROM {table}"))
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    (
        order_count(pool).await,
        count("tickets").await,
        count("outbox").await,
        count("buyer_holdings").await,
    )
}

/// The order by the published rule, computed here on its own: SHA-256 of
/// the seed's bytes then the id's 16 bytes, ascending; ties by id.
fn recompute(seed_hex: &str, ids: &[Uuid]) -> Vec<Uuid> {
    let seed = hex::decode(seed_hex).unwrap();
    let mut keyed: Vec<([u8; 32], Uuid)> = ids
        .iter()
        .map(|id| {
            let mut h = Sha256::new();
            h.update(&seed);
            h.update(id.as_bytes());
            (h.finalize().into(), *id)
        })
        .collect();
    keyed.sort();
    keyed.into_iter().map(|(_, id)| id).collect()
}

/// Spearman's rank correlation of two rankings of the same n items.
fn spearman(ranks_a: &[usize], ranks_b: &[usize]) -> f64 {
    let n = ranks_a.len() as f64;
    let d2: f64 = ranks_a
        .iter()
        .zip(ranks_b)
        .map(|(a, b)| {
            let d = *a as f64 - *b as f64;
            d * d
        })
        .sum();
    1.0 - 6.0 * d2 / (n * (n * n - 1.0))
}

async fn queue_order(pool: &PgPool, event_id: Uuid) -> Vec<Uuid> {
    sqlx::query_scalar("SELECT id FROM queue_entries WHERE event_id = $1 ORDER BY position, seq")
        .bind(event_id)
        .fetch_all(pool)
        .await
        .unwrap()
}

#[sqlx::test]
async fn a_thousand_joiners_are_shuffled_verifiably_and_later_ones_queue_by_arrival(pool: PgPool) {
    let opens = now() + Duration::minutes(10);
    let fixture = event_with_window(
        &pool,
        opens,
        None,
        "published",
        &[TicketSpec::new(10, 2, 2)],
    )
    .await;
    let event_id = EventId::from(fixture.event_id);
    waiting_room::save(&pool, event_id, &settings(60))
        .await
        .unwrap();
    let rooms = common::test_rooms(RoomKey::random(), 10_000);

    // Before the opening: the commitment only.
    let room = waiting_room::load(&pool, event_id).await.unwrap().unwrap();
    assert_eq!(room.revealed_seed_hex(), None);
    let commitment = room.commitment_hex();
    assert!(
        waiting_room::published_prequeue(&pool, event_id)
            .await
            .unwrap()
            .is_none()
    );

    let before = opens - Duration::minutes(5);
    let mut joined = Vec::new();
    for _ in 0..1000 {
        let entry = waiting_room::join(
            &pool,
            &rooms,
            event_id,
            None,
            Some(&common::proof(&rooms, event_id, before)),
            None,
            before,
        )
        .await
        .unwrap();
        assert!(entry.new);
        joined.push(entry.entry.get());
    }
    // The same browser again keeps its place.
    let again = waiting_room::join(
        &pool,
        &rooms,
        event_id,
        Some(
            &rooms
                .key()
                .entry_token(event_id, QueueEntryId::from(joined[0])),
        ),
        None,
        None,
        before,
    )
    .await
    .unwrap();
    assert!(!again.new);
    assert_eq!(again.entry.get(), joined[0]);

    // The opening: the first shuffler orders the pre-queue, the next finds it done.
    assert!(waiting_room::shuffle(&pool, event_id).await.unwrap());
    assert!(!waiting_room::shuffle(&pool, event_id).await.unwrap());

    // Later arrivals, after the opening.
    let after = opens + Duration::seconds(1);
    let mut later = Vec::new();
    for _ in 0..5 {
        later.push(
            waiting_room::join(
                &pool,
                &rooms,
                event_id,
                None,
                Some(&common::proof(&rooms, event_id, after)),
                None,
                after,
            )
            .await
            .unwrap()
            .entry
            .get(),
        );
    }

    let order = queue_order(&pool, event_id.get()).await;
    assert_eq!(order.len(), 1005);
    let (prequeue, tail) = order.split_at(1000);
    assert_eq!(
        tail,
        later.as_slice(),
        "later arrivals queue in arrival order"
    );
    let mut as_set = prequeue.to_vec();
    as_set.sort();
    let mut joiners = joined.clone();
    joiners.sort();
    assert_eq!(
        as_set, joiners,
        "the pre-queue's order is a permutation of its joiners"
    );

    let join_rank: Vec<usize> = (0..joined.len()).collect();
    let shuffled_rank: Vec<usize> = joined
        .iter()
        .map(|id| prequeue.iter().position(|p| p == id).unwrap())
        .collect();
    let rho = spearman(&join_rank, &shuffled_rank);
    assert!(
        rho.abs() < 0.1,
        "rank correlation with the join order: {rho}"
    );

    // What is published is enough to recompute the order.
    let (room, published) = waiting_room::published_prequeue(&pool, event_id)
        .await
        .unwrap()
        .unwrap();
    let seed = room.revealed_seed_hex().unwrap();
    assert_eq!(
        hex::encode(Sha256::digest(hex::decode(&seed).unwrap())),
        commitment,
        "the revealed seed matches the commitment shown before"
    );
    assert_eq!(
        published, joiners,
        "the published list is the pre-queue, by id"
    );
    assert_eq!(recompute(&seed, &published), prequeue);
}

/// An app whose passes are signed with `key`, over a room-on event whose
/// sale opened an hour ago.
async fn queued_app(pool: &PgPool, key: &RoomKey) -> (TestApp, Fixture) {
    let fixture = published_event(pool, &[TicketSpec::new(10, 2, 2)]).await;
    waiting_room::save(pool, EventId::from(fixture.event_id), &settings(60))
        .await
        .unwrap();
    let clock = ManualClock::new(now());
    // One buyer's many attempts: the purchase rate limits are not under test.
    let mut limits = stampede::web::Limits::default();
    limits.purchase_rates.per_ip_burst = 0;
    limits.purchase_rates.per_email_burst = 0;
    let state = AppState::new(pool.clone())
        .with_clock(clock.clone())
        .with_limits(limits)
        .with_list_cache_ttl(StdDuration::ZERO)
        .with_rooms(common::test_rooms(key.clone(), 10));
    (
        TestApp::spawn_state(pool.clone(), clock, state).await,
        fixture,
    )
}

async fn order(
    app: &TestApp,
    ticket_type_id: Uuid,
    key: &str,
    pass: Option<&str>,
) -> (StatusCode, Value) {
    let mut body = json!({
        "ticket_type_id": ticket_type_id,
        "quantity": 1,
        "email": "fan@example.org",
        "idempotency_key": key,
    });
    if let Some(pass) = pass {
        body["pass"] = json!(pass);
    }
    let resp = app
        .client
        .post(app.url("/api/v1/orders"))
        .json(&body)
        .send()
        .await
        .unwrap();
    (resp.status(), resp.json().await.unwrap())
}

#[sqlx::test]
async fn buying_a_queued_event_needs_a_valid_unspent_pass_and_refusals_write_nothing(pool: PgPool) {
    let key = RoomKey::random();
    let (app, fixture) = queued_app(&pool, &key).await;
    let event_id = EventId::from(fixture.event_id);
    let tt = fixture.ticket_type_id();
    let now = app.clock.now();

    // Ticket type ids are hidden from the public API until admitted.
    let event: Value = app
        .client
        .get(app.url(&format!("/api/v1/events/{event_id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(event["ticket_types"][0].get("id").is_none(), "{event}");
    let page = app
        .client
        .get(app.url(&format!("/events/{event_id}")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !page.contains(&tt.to_string()),
        "the page shows no ticket type id"
    );
    assert!(page.contains("Join the queue"));

    // Join through the API, get admitted, fetch the pass.
    let proof = api_proof(&app.client, &app, event_id.get()).await;
    let joined = app
        .client
        .post(app.url(&format!("/api/v1/events/{event_id}/queue")))
        .json(&json!({ "proof": proof }))
        .send()
        .await
        .unwrap();
    assert_eq!(joined.status(), StatusCode::CREATED);
    let token = joined.headers()["stampede-queue-entry"]
        .to_str()
        .unwrap()
        .to_owned();
    let joined: Value = joined.json().await.unwrap();
    assert_eq!(joined["token"], token.as_str());
    assert_eq!(joined["state"], "waiting");
    assert_eq!(joined["place"], 1);
    assert_eq!(waiting_room::tick(&pool, now).await.unwrap(), Some(1));
    let position: Value = app
        .client
        .get(app.url(&format!("/api/v1/events/{event_id}/queue")))
        .header("stampede-queue-entry", &token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(position["state"], "admitted", "{position}");
    let pass = position["pass"].as_str().unwrap().to_owned();
    let entry =
        QueueEntryId::from(Uuid::parse_str(position["entry_id"].as_str().unwrap()).unwrap());

    // With the pass, the ids show.
    let event: Value = app
        .client
        .get(app.url(&format!("/api/v1/events/{event_id}?pass={pass}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(event["ticket_types"][0]["id"], tt.to_string());

    let other = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let refusals = [
        (None, "pass_required"),
        (
            Some(
                key.pass(event_id, entry, now - Duration::seconds(1))
                    .to_string(),
            ),
            "pass_expired",
        ),
        (
            Some(
                RoomKey::random()
                    .pass(event_id, entry, now + Duration::minutes(5))
                    .to_string(),
            ),
            "pass_invalid",
        ),
        (
            Some(
                key.pass(
                    EventId::from(other.event_id),
                    entry,
                    now + Duration::minutes(5),
                )
                .to_string(),
            ),
            "pass_invalid",
        ),
        (Some(format!("{pass}0")), "pass_invalid"),
    ];
    for (presented, code) in refusals {
        let (status, body) =
            order(&app, tt, &Uuid::new_v4().to_string(), presented.as_deref()).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert_eq!(body["error"]["code"], code, "{body}");
        assert_eq!(
            written(&pool).await,
            (0, 0, 0, 0),
            "a refusal ({code}) wrote nothing"
        );
    }
    // The buy form without a pass cookie is refused the same way.
    let form = common::forms::form_body(&[
        ("ticket_type_id", &tt.to_string()),
        ("quantity", "1"),
        ("email", "fan@example.org"),
        ("idempotency_key", &Uuid::new_v4().to_string()),
    ]);
    let refused = app
        .client
        .post(app.url(&format!("/events/{event_id}/orders")))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("cookie", common::csrf_cookie())
        .body(form)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    assert_eq!(written(&pool).await, (0, 0, 0, 0));

    // The pass buys once; its own retry replays; another purchase is refused.
    let bought_key = Uuid::new_v4().to_string();
    let (status, body) = order(&app, tt, &bought_key, Some(&pass)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, _) = order(&app, tt, &bought_key, Some(&pass)).await;
    assert_eq!(status, StatusCode::OK);
    let after_sale = written(&pool).await;
    assert_eq!(after_sale.0, 1);
    let (status, body) = order(&app, tt, &Uuid::new_v4().to_string(), Some(&pass)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "pass_spent");
    assert_eq!(
        written(&pool).await,
        after_sale,
        "a spent pass wrote nothing"
    );
    let spent: Option<Uuid> = sqlx::query_scalar("SELECT queue_entry_id FROM orders")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        spent,
        Some(entry.get()),
        "the order records the entry it spent"
    );
    common::assert_invariants(&pool).await;
}

#[sqlx::test]
async fn the_unique_entry_on_orders_is_the_last_word_on_a_spent_pass(pool: PgPool) {
    // Past the pre-check (two purchases racing with one pass): the sale's
    // own transaction refuses the second.
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let entry = QueueEntryId::from(Uuid::new_v4());
    let request = |email: &str| {
        let mut request = common::purchase::purchase_request(fixture.ticket_type_id(), 1, email);
        request.queue_entry = Some(entry);
        request
    };
    stampede::sale::purchase(&pool, now(), &request("a@example.org"))
        .await
        .unwrap();
    let before = written(&pool).await;
    let second = stampede::sale::purchase(&pool, now(), &request("b@example.org")).await;
    assert!(
        matches!(second, Err(stampede::error::AppError::PassSpent)),
        "{second:?}"
    );
    assert_eq!(written(&pool).await, before);
}

/// Without a room there is no pass to spend: an entry the caller names is
/// dropped before the sale (it cannot reserve an entry of another event's
/// room), so the order records none.
#[sqlx::test]
async fn an_entry_named_for_an_event_without_a_room_is_not_recorded(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let sales = Sales::new(pool.clone(), Strategy::Batch, EngineSettings::default());
    let mut request =
        common::purchase::purchase_request(fixture.ticket_type_id(), 1, "a@example.org");
    request.queue_entry = Some(QueueEntryId::from(Uuid::new_v4()));
    let created = sales.purchase(now(), &request).await;
    assert!(
        matches!(created, Ok(Purchase::Created { .. })),
        "{created:?}"
    );
    let recorded: Option<Uuid> = sqlx::query_scalar("SELECT queue_entry_id FROM orders")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        recorded, None,
        "an entry recorded for an event with no room"
    );
}

async fn entries(pool: &PgPool, rooms: &Rooms, event_id: EventId, n: usize, at: OffsetDateTime) {
    for _ in 0..n {
        waiting_room::join(
            pool,
            rooms,
            event_id,
            None,
            Some(&common::proof(rooms, event_id, at)),
            None,
            at,
        )
        .await
        .unwrap();
    }
}

async fn admitted(pool: &PgPool, event_id: EventId) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM queue_entries WHERE event_id = $1 AND admitted_at IS NOT NULL",
    )
    .bind(event_id.get())
    .fetch_one(pool)
    .await
    .unwrap()
}

#[sqlx::test]
async fn two_admitters_at_once_admit_no_entry_twice_and_keep_to_the_rate(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let event_id = EventId::from(fixture.event_id);
    waiting_room::save(&pool, event_id, &settings(600))
        .await
        .unwrap();
    let rooms = common::test_rooms(RoomKey::random(), 10_000);
    let t0 = now();
    entries(&pool, &rooms, event_id, 300, t0 - Duration::seconds(30)).await;
    sqlx::query("UPDATE waiting_rooms SET admit_clock = $2 WHERE event_id = $1")
        .bind(event_id.get())
        .bind(t0)
        .execute(&pool)
        .await
        .unwrap();

    // Two instances tick over the same ten seconds (600 a minute: 100).
    let admitter = |pool: PgPool| async move {
        let mut admitted = 0;
        for second in 1..=10 {
            if let Some(n) = waiting_room::tick(&pool, t0 + Duration::seconds(second))
                .await
                .unwrap()
            {
                admitted += n;
            }
        }
        admitted
    };
    let (a, b) = tokio::join!(
        tokio::spawn(admitter(pool.clone())),
        tokio::spawn(admitter(pool.clone()))
    );
    let last = waiting_room::tick(&pool, t0 + Duration::seconds(10))
        .await
        .unwrap()
        .unwrap();
    let claimed = a.unwrap() + b.unwrap() + last;
    let in_table = admitted(&pool, event_id).await;
    assert_eq!(claimed as i64, in_table, "no entry admitted twice");
    assert_eq!(in_table, 100, "ten seconds at 600 a minute");
    // In queue order.
    let first_hundred: Vec<Uuid> = queue_order(&pool, event_id.get())
        .await
        .into_iter()
        .take(100)
        .collect();
    let admitted_ids: Vec<Uuid> = sqlx::query_scalar(
        "SELECT id FROM queue_entries WHERE event_id = $1 AND admitted_at IS NOT NULL ORDER BY position, seq",
    )
    .bind(event_id.get())
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(admitted_ids, first_hundred);
}

#[sqlx::test]
async fn the_cap_bounds_active_passes_and_pause_stops_admission(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let event_id = EventId::from(fixture.event_id);
    let capped = RoomSettings {
        enabled: true,
        admit_per_minute: None,
        max_active: Some(3),
        ..RoomSettings::default()
    };
    waiting_room::save(&pool, event_id, &capped).await.unwrap();
    let rooms = common::test_rooms(RoomKey::random(), 10_000);
    let t0 = now();
    entries(&pool, &rooms, event_id, 10, t0).await;
    assert_eq!(waiting_room::tick(&pool, t0).await.unwrap(), Some(3));
    assert_eq!(
        waiting_room::tick(&pool, t0 + Duration::seconds(1))
            .await
            .unwrap(),
        Some(0)
    );
    // Passes expire: room for three more.
    let later = t0 + Duration::minutes(11);
    waiting_room::save(
        &pool,
        event_id,
        &RoomSettings {
            paused: true,
            ..capped.clone()
        },
    )
    .await
    .unwrap();
    assert_eq!(
        waiting_room::tick(&pool, later).await.unwrap(),
        Some(0),
        "paused"
    );
    waiting_room::save(&pool, event_id, &capped).await.unwrap();
    assert_eq!(waiting_room::tick(&pool, later).await.unwrap(), Some(3));
    assert_eq!(admitted(&pool, event_id).await, 6);
}

#[sqlx::test]
async fn a_crashed_admitter_is_replaced(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let event_id = EventId::from(fixture.event_id);
    waiting_room::save(&pool, event_id, &settings(600))
        .await
        .unwrap();
    let rooms = common::test_rooms(RoomKey::random(), 10_000);
    let t0 = now();
    entries(&pool, &rooms, event_id, 20, t0 - Duration::seconds(30)).await;

    // An admitter that took the lock and then hangs, in a connection of its own.
    let options = pool.connect_options();
    let mut stuck = PgConnection::connect_with(&options).await.unwrap();
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut stuck)
        .await
        .unwrap();
    sqlx::query("BEGIN").execute(&mut stuck).await.unwrap();
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(waiting_room::ADMITTER_LOCK)
        .execute(&mut stuck)
        .await
        .unwrap();
    assert_eq!(
        waiting_room::tick(&pool, t0).await.unwrap(),
        None,
        "another admitter stands by"
    );
    assert_eq!(admitted(&pool, event_id).await, 0);

    // It dies (its backend is killed, as when its host goes away).
    let killed: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(pid)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(killed);
    drop(stuck);
    // The next tick of the other instance takes over (the lock goes with
    // the connection; terminating waits for nothing, so poll a few times).
    let mut took_over = None;
    for _ in 0..50 {
        took_over = waiting_room::tick(&pool, t0).await.unwrap();
        if took_over.is_some() {
            break;
        }
        tokio::time::sleep(StdDuration::from_millis(100)).await;
    }
    assert!(took_over.is_some_and(|n| n > 0), "{took_over:?}");
    assert!(admitted(&pool, event_id).await > 0);
}

/// A challenge from the API, solved by the rule, as any client would.
async fn api_proof(client: &reqwest::Client, app: &TestApp, event_id: Uuid) -> String {
    let challenge: Value = client
        .get(app.url(&format!("/api/v1/events/{event_id}/queue/challenge")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let bits = u32::try_from(challenge["difficulty_bits"].as_u64().unwrap()).unwrap();
    assert_eq!(challenge["expected_hashes"], 1_u64 << bits);
    waiting_room::solve(challenge["challenge"].as_str().unwrap(), bits)
}

/// A browser: keeps its cookies, follows no redirects.
fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .cookie_store(true)
        .build()
        .unwrap()
}

async fn text(client: &reqwest::Client, url: String) -> String {
    client.get(url).send().await.unwrap().text().await.unwrap()
}

async fn post(
    client: &reqwest::Client,
    url: String,
    fields: &[(&str, &str)],
    csrf: &str,
) -> reqwest::Response {
    client
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(common::forms::with_csrf(fields, csrf))
        .send()
        .await
        .unwrap()
}

#[sqlx::test]
async fn a_browser_joins_waits_is_admitted_and_buys_once(pool: PgPool) {
    let key = RoomKey::random();
    let (app, fixture) = queued_app(&pool, &key).await;
    let event_id = fixture.event_id;
    let tt = fixture.ticket_type_id().to_string();
    let buyer = browser();
    let page = text(&buyer, app.url(&format!("/events/{event_id}"))).await;
    let csrf = common::csrf_from_page(&page);
    assert!(!page.contains(&tt));

    // Joining, twice (a second tab, with its own solved challenge): one place.
    for _ in 0..2 {
        let proof = api_proof(&buyer, &app, event_id).await;
        let joined = post(
            &buyer,
            app.url(&format!("/events/{event_id}/queue")),
            &[("proof", &proof)],
            &csrf,
        )
        .await;
        assert_eq!(joined.status(), StatusCode::SEE_OTHER);
        assert_eq!(
            common::location(&joined),
            format!("/events/{event_id}/queue")
        );
    }
    let entries: i64 = sqlx::query_scalar("SELECT count(*) FROM queue_entries")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(entries, 1);

    let waiting = text(&buyer, app.url(&format!("/events/{event_id}/queue"))).await;
    assert!(waiting.contains("You are number"), "{waiting}");
    assert!(waiting.contains("http-equiv=\"refresh\""));

    // Admitted: the page hands over the pass, and the event page its form.
    assert_eq!(
        waiting_room::tick(&pool, app.clock.now()).await.unwrap(),
        Some(1)
    );
    let admitted = text(&buyer, app.url(&format!("/events/{event_id}/queue"))).await;
    assert!(admitted.contains("It is your turn"), "{admitted}");
    assert!(!admitted.contains("http-equiv=\"refresh\""));
    let page = text(&buyer, app.url(&format!("/events/{event_id}"))).await;
    assert!(
        page.contains(&tt),
        "the buy form shows to the admitted buyer"
    );

    let buy = |key: String| {
        let buyer = buyer.clone();
        let url = app.url(&format!("/events/{event_id}/orders"));
        let tt = tt.clone();
        let csrf = csrf.clone();
        async move {
            post(
                &buyer,
                url,
                &[
                    ("ticket_type_id", &tt),
                    ("quantity", "1"),
                    ("email", "fan@example.org"),
                    ("idempotency_key", &key),
                ],
                &csrf,
            )
            .await
        }
    };
    let bought = buy(Uuid::new_v4().to_string()).await;
    assert_eq!(bought.status(), StatusCode::SEE_OTHER);
    assert!(common::location(&bought).starts_with("/orders/"));
    let again = buy(Uuid::new_v4().to_string()).await;
    assert_eq!(again.status(), StatusCode::FORBIDDEN);
    assert!(again.text().await.unwrap().contains("already used"));
    assert_eq!(order_count(&pool).await, 1);
    // Another browser, without a pass, sees no form.
    let stranger = text(&browser(), app.url(&format!("/events/{event_id}"))).await;
    assert!(!stranger.contains(&tt));
    // The first join after the opening shuffled the (empty) pre-queue:
    // the seed is public.
    let room = waiting_room::load(&pool, EventId::from(event_id))
        .await
        .unwrap()
        .unwrap();
    let seed = room.revealed_seed_hex().unwrap();
    assert!(stranger.contains(&seed), "the event page reveals the seed");
    assert!(stranger.contains(&room.commitment_hex()));
    let published: Value = buyer
        .get(app.url(&format!("/events/{event_id}/queue/prequeue.json")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(published["seed"], seed.as_str());
    // This buyer came after the opening: queued by arrival, not in the pre-queue.
    assert_eq!(published["entries"], json!([]));
}

#[sqlx::test]
async fn the_organizer_sets_the_room_on_the_edit_page(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("room@example.org").await;
    let fixture =
        common::organizer::owned_published_event(&org, &[TicketSpec::new(10, 2, 2)]).await;
    let event_id = fixture.event_id;
    let edit = org
        .get(&format!("/organizer/events/{event_id}/edit"))
        .await
        .text()
        .await
        .unwrap();
    assert!(edit.contains("Waiting room on"));

    // Bought without a room: this instance remembers "no room" for the type...
    let tt = fixture.ticket_type_id();
    let (status, body) = order(&app, tt, &Uuid::new_v4().to_string(), None).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    let path = format!("/organizer/events/{event_id}/waiting-room");
    // A bad field comes back named, filled in; nothing saved.
    let refused = org
        .post_form(
            &path,
            &[
                ("enabled", "on"),
                ("prequeue_minutes", "15"),
                ("admit_per_minute", "0"),
                ("pass_minutes", "10"),
            ],
        )
        .await;
    assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let page = refused.text().await.unwrap();
    assert!(page.contains("buyers per minute"), "{page}");
    assert!(
        waiting_room::load(&pool, EventId::from(event_id))
            .await
            .unwrap()
            .is_none()
    );

    let saved = org
        .post_form(
            &path,
            &[
                ("enabled", "on"),
                ("prequeue_minutes", "20"),
                ("admit_per_minute", "120"),
                ("max_active", ""),
                ("pass_minutes", "5"),
            ],
        )
        .await;
    assert_eq!(saved.status(), StatusCode::SEE_OTHER);
    // ...and forgets it when the room is switched on here: no pass, no sale.
    let (status, body) = order(&app, tt, &Uuid::new_v4().to_string(), None).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "pass_required");
    assert_eq!(order_count(&pool).await, 1);
    let room = waiting_room::load(&pool, EventId::from(event_id))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        room.settings,
        RoomSettings {
            enabled: true,
            prequeue_minutes: 20,
            admit_per_minute: Some(120),
            max_active: None,
            pass_minutes: 5,
            paused: false,
        }
    );
    // The edit page then shows the room's four figures, and links to the
    // dashboard's live panel.
    let edit = org
        .get(&format!("/organizer/events/{event_id}/edit"))
        .await
        .text()
        .await
        .unwrap();
    for figure in [
        "In the queue: <strong>0</strong>",
        "admitted in the last minute: <strong>0</strong>",
        "admitted so far: <strong>0</strong>",
        "live passes: <strong>0</strong>",
    ] {
        assert!(edit.contains(figure), "{figure} missing: {edit}");
    }
    assert!(edit.contains(&format!(
        "href=\"/organizer/events/{event_id}#waiting-room\""
    )));

    // Another organizer's event does not exist for them; a post without
    // the CSRF field is refused.
    let other = app.organizer("other@example.org").await;
    let theirs = other
        .post_form(
            &path,
            &[
                ("enabled", "on"),
                ("prequeue_minutes", "1"),
                ("admit_per_minute", "1"),
                ("pass_minutes", "1"),
            ],
        )
        .await;
    assert_eq!(theirs.status(), StatusCode::NOT_FOUND);
    let forged = org
        .client
        .post(org.url(&path))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("enabled=off&prequeue_minutes=1&admit_per_minute=1&pass_minutes=1")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    let room = waiting_room::load(&pool, EventId::from(event_id))
        .await
        .unwrap()
        .unwrap();
    assert!(room.settings.enabled && room.settings.prequeue_minutes == 20);
}

#[sqlx::test]
async fn one_client_address_holds_a_bounded_number_of_entries(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let event_id = EventId::from(fixture.event_id);
    waiting_room::save(&pool, event_id, &settings(60))
        .await
        .unwrap();
    let rooms = common::test_rooms(RoomKey::random(), 3);
    let at = now();
    let join = |ip: &str| {
        let ip: std::net::IpAddr = ip.parse().unwrap();
        let (pool, rooms) = (pool.clone(), rooms.clone());
        async move {
            let proof = common::proof(&rooms, event_id, at);
            waiting_room::join(&pool, &rooms, event_id, None, Some(&proof), Some(ip), at).await
        }
    };
    for ip in ["2001:db8::1", "2001:db8::2", "2001:db8::ffff"] {
        join(ip).await.unwrap();
    }
    // The same /64 is the same client.
    let refused = join("2001:db8::9").await;
    assert!(
        matches!(
            refused,
            Err(stampede::error::AppError::TooManyEntries { max: 3 })
        ),
        "{refused:?}"
    );
    join("2001:db8:0:1::1").await.unwrap();
    join("192.0.2.7").await.unwrap();
    let entries: i64 = sqlx::query_scalar("SELECT count(*) FROM queue_entries")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(entries, 5);
}

#[sqlx::test]
async fn nobody_joins_a_draft_a_room_that_is_off_or_a_queue_not_open_yet(pool: PgPool) {
    let rooms = common::test_rooms(RoomKey::random(), 10);
    let at = now();
    let join = |event_id: EventId| {
        let (pool, rooms) = (pool.clone(), rooms.clone());
        async move {
            let proof = common::proof(&rooms, event_id, at);
            waiting_room::join(&pool, &rooms, event_id, None, Some(&proof), None, at).await
        }
    };
    let specs = [TicketSpec::new(10, 2, 2)];

    let draft = event_with_window(&pool, at - Duration::hours(1), None, "draft", &specs).await;
    let draft = EventId::from(draft.event_id);
    waiting_room::save(&pool, draft, &settings(60))
        .await
        .unwrap();
    assert!(matches!(
        join(draft).await,
        Err(stampede::error::AppError::NotFound)
    ));

    let off = EventId::from(published_event(&pool, &specs).await.event_id);
    waiting_room::save(&pool, off, &RoomSettings::default())
        .await
        .unwrap();
    assert!(matches!(
        join(off).await,
        Err(stampede::error::AppError::NotFound)
    ));

    // The pre-queue opens 15 minutes before a sale that opens in an hour.
    let early = event_with_window(&pool, at + Duration::hours(1), None, "published", &specs).await;
    let early = EventId::from(early.event_id);
    waiting_room::save(&pool, early, &settings(60))
        .await
        .unwrap();
    assert!(matches!(
        join(early).await,
        Err(stampede::error::AppError::Forbidden(_))
    ));

    let entries: i64 = sqlx::query_scalar("SELECT count(*) FROM queue_entries")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(entries, 0);
}

async fn api_join(
    app: &TestApp,
    event_id: Uuid,
    body: Option<Value>,
    token: Option<&str>,
) -> (StatusCode, Value) {
    let mut request = app
        .client
        .post(app.url(&format!("/api/v1/events/{event_id}/queue")));
    if let Some(body) = body {
        request = request.json(&body);
    }
    if let Some(token) = token {
        request = request.header("stampede-queue-entry", token);
    }
    let resp = request.send().await.unwrap();
    (resp.status(), resp.json().await.unwrap())
}

async fn entry_count(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM queue_entries")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test]
async fn joining_needs_a_fresh_solved_challenge_and_every_refusal_writes_nothing(pool: PgPool) {
    let key = RoomKey::random();
    let (app, fixture) = queued_app(&pool, &key).await;
    let event_id = fixture.event_id;
    let code = |(status, body): (StatusCode, Value)| {
        (
            status,
            body["error"]["code"].as_str().unwrap_or("").to_owned(),
        )
    };

    // Nothing, garbage, the bare challenge, a nonce that misses the zero bits.
    let refused = code(api_join(&app, event_id, None, None).await);
    assert_eq!(refused, (StatusCode::FORBIDDEN, "proof_required".into()));
    let refused = code(api_join(&app, event_id, Some(json!({"proof": "nope"})), None).await);
    assert_eq!(refused, (StatusCode::FORBIDDEN, "proof_invalid".into()));
    let challenge: Value = app
        .client
        .get(app.url(&format!("/api/v1/events/{event_id}/queue/challenge")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = challenge["challenge"].as_str().unwrap();
    let bits = u32::try_from(challenge["difficulty_bits"].as_u64().unwrap()).unwrap();
    assert_eq!(bits, common::TEST_PROOF_BITS);
    let refused = code(api_join(&app, event_id, Some(json!({"proof": token})), None).await);
    assert_eq!(refused, (StatusCode::FORBIDDEN, "proof_invalid".into()));
    let wrong = (0..)
        .map(|n| format!("{token}.{n}"))
        .find(|p| waiting_room::leading_zero_bits(&Sha256::digest(p.as_bytes())) < bits)
        .unwrap();
    let refused = code(api_join(&app, event_id, Some(json!({"proof": wrong})), None).await);
    assert_eq!(refused, (StatusCode::FORBIDDEN, "proof_invalid".into()));
    // Unknown fields and non-objects are refused too.
    let (status, _) = api_join(&app, event_id, Some(json!({"prooof": "x"})), None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // Another event's solution is not this one's.
    let other = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    waiting_room::save(&pool, EventId::from(other.event_id), &settings(60))
        .await
        .unwrap();
    let theirs = api_proof(&app.client, &app, other.event_id).await;
    let refused = code(api_join(&app, event_id, Some(json!({"proof": theirs})), None).await);
    assert_eq!(refused, (StatusCode::FORBIDDEN, "proof_invalid".into()));

    // An expired one.
    let stale = waiting_room::solve(token, bits);
    app.clock.set(app.clock.now() + waiting_room::CHALLENGE_TTL);
    let refused = code(api_join(&app, event_id, Some(json!({"proof": stale})), None).await);
    assert_eq!(refused, (StatusCode::FORBIDDEN, "proof_expired".into()));
    assert_eq!(entry_count(&pool).await, 0, "no refusal wrote an entry");

    // A good one joins once; replayed (without the entry's token, as a
    // script would) it makes no second entry.
    let proof = api_proof(&app.client, &app, event_id).await;
    let (status, joined) = api_join(&app, event_id, Some(json!({"proof": proof})), None).await;
    assert_eq!(status, StatusCode::CREATED, "{joined}");
    for _ in 0..3 {
        let refused = code(api_join(&app, event_id, Some(json!({"proof": proof})), None).await);
        assert_eq!(refused, (StatusCode::CONFLICT, "proof_reused".into()));
    }
    assert_eq!(entry_count(&pool).await, 1);
    // The holder of the entry keeps it without solving again.
    let (status, again) = api_join(
        &app,
        event_id,
        None,
        Some(joined["token"].as_str().unwrap()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["entry_id"], joined["entry_id"]);

    // The form without a proof (JavaScript off): refused, and the page says why.
    let buyer = browser();
    let page = text(&buyer, app.url(&format!("/events/{event_id}"))).await;
    assert!(page.contains("<noscript>"), "{page}");
    assert!(page.contains("Joining this queue needs JavaScript"));
    assert!(page.contains("/static/proof-worker.js?v="));
    let csrf = common::csrf_from_page(&page);
    let refused = post(
        &buyer,
        app.url(&format!("/events/{event_id}/queue")),
        &[],
        &csrf,
    )
    .await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    assert!(refused.text().await.unwrap().contains("solved challenge"));
    assert_eq!(entry_count(&pool).await, 1);
    // The worker is served as a script from this site.
    let worker = app
        .client
        .get(app.url("/static/proof-worker.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(worker.status(), StatusCode::OK);
    assert!(
        worker.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
}

#[sqlx::test]
async fn simultaneous_joins_from_one_address_stay_within_its_cap(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let event_id = EventId::from(fixture.event_id);
    waiting_room::save(&pool, event_id, &settings(60))
        .await
        .unwrap();
    const CAP: u32 = 3;
    let rooms = common::test_rooms(RoomKey::random(), CAP);
    let at = now();
    // Many rounds, each a fresh address whose joins all start at once:
    // without a lock between the count and the insert, some round lets
    // more than CAP in.
    for round in 0..20_u8 {
        let ip = std::net::IpAddr::from([198, 51, 100, round]);
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(16));
        let joins: Vec<_> = (0..16)
            .map(|_| {
                let (pool, rooms, barrier) = (pool.clone(), rooms.clone(), barrier.clone());
                let proof = common::proof(&rooms, event_id, at);
                tokio::spawn(async move {
                    barrier.wait().await;
                    waiting_room::join(&pool, &rooms, event_id, None, Some(&proof), Some(ip), at)
                        .await
                })
            })
            .collect();
        let mut joined = 0;
        for join in joins {
            match join.await.unwrap() {
                Ok(_) => joined += 1,
                Err(stampede::error::AppError::TooManyEntries { max: CAP }) => {}
                Err(other) => panic!("{other:?}"),
            }
        }
        assert_eq!(joined, CAP, "round {round}: joins let in");
    }
    assert_eq!(entry_count(&pool).await, 20 * i64::from(CAP));
}

/// How many entries are ahead of `entry` and not yet admitted, counted
/// the slow way: by the admission order (pre-queue places, then arrivals).
async fn counted_ahead(pool: &PgPool, event_id: Uuid, entry: Uuid) -> i64 {
    let order = queue_order(pool, event_id).await;
    let admitted: std::collections::HashSet<Uuid> = sqlx::query_scalar(
        "SELECT id FROM queue_entries WHERE event_id = $1 AND admitted_at IS NOT NULL",
    )
    .bind(event_id)
    .fetch_all(pool)
    .await
    .unwrap()
    .into_iter()
    .collect();
    let at = order.iter().position(|id| *id == entry).unwrap();
    order[..at]
        .iter()
        .filter(|id| !admitted.contains(id))
        .count() as i64
}

#[sqlx::test]
async fn a_position_from_ranks_equals_a_count_of_those_ahead(pool: PgPool) {
    let opens = now() + Duration::minutes(10);
    let fixture = event_with_window(
        &pool,
        opens,
        None,
        "published",
        &[TicketSpec::new(10, 2, 2)],
    )
    .await;
    let event_id = EventId::from(fixture.event_id);
    waiting_room::save(&pool, event_id, &settings(600))
        .await
        .unwrap();
    let rooms = common::test_rooms(RoomKey::random(), 10_000);
    let join = |at: OffsetDateTime| {
        let (pool, rooms) = (pool.clone(), rooms.clone());
        async move {
            let proof = common::proof(&rooms, event_id, at);
            waiting_room::join(&pool, &rooms, event_id, None, Some(&proof), None, at)
                .await
                .unwrap()
                .entry
        }
    };
    let mut all = Vec::new();
    for _ in 0..30 {
        all.push(join(opens - Duration::minutes(5)).await);
    }
    let check = |all: Vec<QueueEntryId>, what: &'static str| {
        let pool = pool.clone();
        async move {
            let mut waiting = 0;
            for entry in all {
                match waiting_room::standing(&pool, event_id, entry)
                    .await
                    .unwrap()
                {
                    waiting_room::Standing::Waiting { ahead, .. } => {
                        waiting += 1;
                        assert_eq!(
                            ahead,
                            counted_ahead(&pool, event_id.get(), entry.get()).await,
                            "{what}: entry {entry}"
                        );
                    }
                    waiting_room::Standing::Admitted { .. } => {}
                }
            }
            waiting
        }
    };
    // The opening: shuffled, ranked, admitted at 600 a minute (10 a second).
    let mut at = opens + Duration::seconds(1);
    waiting_room::tick(&pool, at).await.unwrap();
    assert_eq!(admitted(&pool, event_id).await, 10);
    assert_eq!(check(all.clone(), "pre-queue, some admitted").await, 20);
    // Arrivals not ranked yet, then ranked; admission goes on among them.
    for round in 0..4 {
        for _ in 0..7 {
            all.push(join(at).await);
        }
        check(all.clone(), "arrivals before the tick ranks them").await;
        at += Duration::seconds(1);
        waiting_room::tick(&pool, at).await.unwrap();
        assert_eq!(admitted(&pool, event_id).await, 20 + round * 10);
        check(all.clone(), "after the tick").await;
    }
    // Paused: arrivals are still ranked, nobody is admitted.
    let mut paused = settings(600);
    paused.paused = true;
    waiting_room::save(&pool, event_id, &paused).await.unwrap();
    for _ in 0..5 {
        all.push(join(at).await);
    }
    at += Duration::seconds(1);
    waiting_room::tick(&pool, at).await.unwrap();
    assert_eq!(admitted(&pool, event_id).await, 50);
    let unranked: i64 = sqlx::query_scalar("SELECT count(*) FROM queue_entries WHERE rank IS NULL")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(unranked, 0);
    assert_eq!(check(all.clone(), "paused").await, 63 - 50);
    // The room row's counters agree with the table.
    let (ranked, upto): (i64, i64) =
        sqlx::query_as("SELECT ranked, admitted_upto FROM waiting_rooms WHERE event_id = $1")
            .bind(event_id.get())
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((ranked, upto), (63, 50));
}

#[sqlx::test]
async fn the_dashboard_shows_the_rooms_figures_and_pauses_and_resumes_admission(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("dash@example.org").await;
    let fixture =
        common::organizer::owned_published_event(&org, &[TicketSpec::new(10, 2, 2)]).await;
    let event_id = EventId::from(fixture.event_id);
    let dashboard = format!("/organizer/events/{event_id}");
    let page = org.get(&dashboard).await.text().await.unwrap();
    assert!(!page.contains("id=\"waiting-room\""), "no room, no panel");

    let capped = RoomSettings {
        max_active: Some(2),
        ..settings(60)
    };
    waiting_room::save(&pool, event_id, &capped).await.unwrap();
    let rooms = common::test_rooms(RoomKey::random(), 100);
    let at = app.clock.now();
    entries(&pool, &rooms, event_id, 5, at).await;
    assert_eq!(waiting_room::tick(&pool, at).await.unwrap(), Some(2));

    let page = org.get(&dashboard).await.text().await.unwrap();
    let figure = |name: &str| {
        let marker = format!("data-figure=\"{name}\">");
        let start = page
            .find(&marker)
            .unwrap_or_else(|| panic!("{name} in {page}"))
            + marker.len();
        page[start..].split('<').next().unwrap().to_owned()
    };
    assert_eq!(figure("waiting"), "3");
    assert_eq!(figure("admitted_last_minute"), "2");
    assert_eq!(figure("admitted"), "2");
    assert_eq!(figure("active_passes"), "2");
    assert_eq!(figure("estimated_secs_to_clear"), "3 s");
    assert_eq!(figure("state"), "admitting");
    assert!(page.contains(&format!(
        "data-live=\"/organizer/events/{event_id}/waiting-room.json\""
    )));
    // The live figures' JSON is the organizer API's, behind the session.
    let live: Value = org
        .get(&format!("/organizer/events/{event_id}/waiting-room.json"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(live["waiting"], 3);
    assert_eq!(live["admitted_last_minute"], 2);
    assert_eq!(live["estimated_secs_to_clear"], 3);

    // Pause from the dashboard (the form carries the CSRF token).
    assert!(page.contains("Pause admission"));
    let path = format!("/organizer/events/{event_id}/waiting-room/admission");
    let paused = org.post_form(&path, &[("paused", "true")]).await;
    assert_eq!(paused.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        common::location(&paused),
        format!("{dashboard}#waiting-room")
    );
    let room = waiting_room::load(&pool, event_id).await.unwrap().unwrap();
    assert!(room.settings.paused);
    assert_eq!(
        waiting_room::tick(&pool, at + Duration::seconds(9))
            .await
            .unwrap(),
        Some(0)
    );
    let page = org.get(&dashboard).await.text().await.unwrap();
    assert!(page.contains("Resume admission"));
    assert_eq!(figure_in(&page, "state"), "paused");

    // Without the CSRF token, or a bad value, or another organizer: refused,
    // nothing changed.
    let forged = org
        .client
        .post(org.url(&path))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("paused=false")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    let bad = org.post_form(&path, &[("paused", "maybe")]).await;
    assert_eq!(bad.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let other = app.organizer("other-dash@example.org").await;
    let theirs = other.post_form(&path, &[("paused", "false")]).await;
    assert_eq!(theirs.status(), StatusCode::NOT_FOUND);
    assert!(
        waiting_room::load(&pool, event_id)
            .await
            .unwrap()
            .unwrap()
            .settings
            .paused
    );

    let resumed = org.post_form(&path, &[("paused", "false")]).await;
    assert_eq!(resumed.status(), StatusCode::SEE_OTHER);
    assert!(
        !waiting_room::load(&pool, event_id)
            .await
            .unwrap()
            .unwrap()
            .settings
            .paused
    );
}

fn figure_in(page: &str, name: &str) -> String {
    let marker = format!("data-figure=\"{name}\">");
    let start = page.find(&marker).unwrap() + marker.len();
    page[start..].split('<').next().unwrap().to_owned()
}

/// Issue 34: the waiting list of an event behind a waiting room is no way
/// round the room. A returned ticket goes to the list first, so joining it
/// needs the room's pass, as buying does; refusals write nothing.
#[sqlx::test]
async fn joining_a_waiting_list_behind_a_room_needs_a_pass(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(1, 1, 1)]).await;
    let event_id = EventId::from(fixture.event_id);
    let tt = fixture.ticket_type_id();
    // Sold out before the room is switched on, so that no pass is needed
    // to sell the seat.
    common::api_buy(
        &TestApp::spawn(pool.clone()).await,
        tt,
        1,
        "first@example.org",
    )
    .await;
    waiting_room::save(&pool, event_id, &settings(60))
        .await
        .unwrap();
    let key = RoomKey::random();
    let clock = ManualClock::new(now());
    let state = AppState::new(pool.clone())
        .with_clock(clock.clone())
        .with_list_cache_ttl(StdDuration::ZERO)
        .with_rooms(common::test_rooms(key.clone(), 10));
    let app = TestApp::spawn_state(pool.clone(), clock.clone(), state).await;
    let path = format!("/events/{event_id}/waiting-list");
    let join = |email: &'static str, pass: Option<String>| {
        let app = &app;
        let path = &path;
        async move {
            let mut cookies = common::forms::csrf_cookie();
            if let Some(pass) = pass {
                cookies.push_str(&format!(
                    "; stampede_pass_{}={pass}",
                    event_id.get().simple()
                ));
            }
            app.client
                .post(app.url(path))
                .header("content-type", "application/x-www-form-urlencoded")
                .header("cookie", cookies)
                .body(common::forms::form_body(&[
                    ("ticket_type_id", &tt.to_string()),
                    ("quantity", "1"),
                    ("email", email),
                ]))
                .send()
                .await
                .unwrap()
        }
    };
    let places = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM waitlist_entries")
            .fetch_one(&pool)
            .await
            .unwrap()
    };

    let no_pass = join("bot@example.org", None).await;
    assert_eq!(no_pass.status(), StatusCode::FORBIDDEN);
    let page = no_pass.text().await.unwrap();
    assert!(
        page.contains("value=\"bot@example.org\""),
        "the form comes back: {page}"
    );
    let forged = key_of_another_deployment_pass(event_id, clock.now());
    assert_eq!(
        join("bot@example.org", Some(forged)).await.status(),
        StatusCode::FORBIDDEN
    );
    let expired = key
        .pass(
            event_id,
            QueueEntryId::from(Uuid::new_v4()),
            clock.now() - Duration::seconds(1),
        )
        .to_string();
    assert_eq!(
        join("bot@example.org", Some(expired)).await.status(),
        StatusCode::FORBIDDEN
    );
    assert_eq!(places().await, 0);

    let pass = key
        .pass(
            event_id,
            QueueEntryId::from(Uuid::new_v4()),
            clock.now() + Duration::minutes(5),
        )
        .to_string();
    let joined = join("fan@example.org", Some(pass)).await;
    assert_eq!(joined.status(), StatusCode::OK);
    assert_eq!(places().await, 1);
}

/// A pass signed with a key this app does not have.
fn key_of_another_deployment_pass(event_id: EventId, now: OffsetDateTime) -> String {
    RoomKey::random()
        .pass(
            event_id,
            QueueEntryId::from(Uuid::new_v4()),
            now + Duration::minutes(5),
        )
        .to_string()
}
