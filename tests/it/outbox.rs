//! Issue 10: the transactional outbox and its RabbitMQ relay, against a
//! real RabbitMQ (127.0.0.1:5672) and real Postgres. Each test binds its own
//! exclusive queue to the exchange before the relay runs and keeps only the
//! messages of the event it created; what it expects is read from the
//! tables (orders, ticket types), never from the outbox itself.
//!
//! "Everything has arrived" is made certain without timing: once every
//! outbox row of the event is marked sent (the broker confirmed it, so it is
//! in our queue), one more order is bought and its message awaited; the
//! queue is first in, first out, so nothing sent before it can still come.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::Duration,
};

use common::{
    TicketSpec,
    amqp::{self, Listener, Message, Proxy},
    assert_invariants, database_url, locks, now, pool,
    process::ServerProcess,
    published_event,
    purchase::purchase_request,
};
use serde_json::json;
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use stampede::{
    error::AppError,
    outbox,
    sale::{self, EngineSettings, Purchase, Sales, Strategy},
};
use tokio::sync::Barrier;
use uuid::Uuid;

/// (type, order id, sequence) of every order message the tables call for:
/// `order.created` (1) for each order of the event, `order.cancelled` (2)
/// for each cancelled one.
async fn expected_order_messages(pool: &PgPool, event_id: Uuid) -> BTreeSet<(String, Uuid, i64)> {
    let orders: Vec<(Uuid, String)> = sqlx::query_as(
        "SELECT o.id, o.status FROM orders o JOIN ticket_types t ON t.id = o.ticket_type_id
         WHERE t.event_id = $1",
    )
    .bind(event_id)
    .fetch_all(pool)
    .await
    .unwrap();
    let mut expected = BTreeSet::new();
    for (id, status) in orders {
        expected.insert(("order.created".to_owned(), id, 1));
        if status == "cancelled" {
            expected.insert(("order.cancelled".to_owned(), id, 2));
        }
    }
    expected
}

fn order_messages(received: &BTreeMap<Uuid, Message>) -> BTreeSet<(String, Uuid, i64)> {
    received
        .values()
        .filter_map(|m| Some((m.kind.clone(), m.order_id?, m.sequence)))
        .collect()
}

/// A ticket type's availability messages, in sequence order: they alternate
/// from `sold_out`, there are as many as the row's transitions, and the
/// last says what `remaining` says.
async fn assert_availability(pool: &PgPool, received: &BTreeMap<Uuid, Message>, tt: Uuid) {
    let (remaining, transitions): (i32, i64) =
        sqlx::query_as("SELECT remaining, availability_seq FROM ticket_types WHERE id = $1")
            .bind(tt)
            .fetch_one(pool)
            .await
            .unwrap();
    let mut kinds: Vec<(i64, &str)> = received
        .values()
        .filter(|m| m.ticket_type_id == Some(tt) && m.order_id.is_none())
        .map(|m| (m.sequence, m.kind.as_str()))
        .collect();
    kinds.sort();
    let expected: Vec<(i64, &str)> = (1..=transitions)
        .map(|n| {
            let kind = if n % 2 == 1 {
                "ticket_type.sold_out"
            } else {
                "ticket_type.available_again"
            };
            (n, kind)
        })
        .collect();
    assert_eq!(kinds, expected, "availability messages of {tt}");
    if let Some((_, last)) = kinds.last() {
        assert_eq!(*last == "ticket_type.sold_out", remaining == 0);
    }
}

/// Wait until the relay's cursor is past every outbox row of the event
/// (bounded).
async fn wait_all_sent(pool: &PgPool, event_id: Uuid) {
    for _ in 0..1200 {
        let unsent: i64 =
            sqlx::query_scalar("SELECT count(*) FROM outbox_behind('amqp') WHERE event_id = $1")
                .bind(event_id)
                .fetch_one(pool)
                .await
                .unwrap();
        if unsent == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("outbox rows of {event_id} still unsent after 2 minutes");
}

/// Everything sent before now has arrived: one more order (on the marker
/// ticket type), and its message awaited. Returns the marker order's id.
async fn settle(pool: &PgPool, listener: &mut Listener, event_id: Uuid, marker_tt: Uuid) -> Uuid {
    wait_all_sent(pool, event_id).await;
    let request = purchase_request(
        marker_tt,
        1,
        &format!("marker-{}@example.org", Uuid::new_v4()),
    );
    let order = sale::purchase(pool, now(), &request)
        .await
        .unwrap()
        .order()
        .id
        .get();
    listener.until_order(event_id, "order.created", order).await;
    order
}

/// No payload carries a secret: only ids and state.
fn assert_no_secrets(received: &BTreeMap<Uuid, Message>) {
    let allowed: BTreeSet<&str> = [
        "order_id",
        "event_id",
        "ticket_type_id",
        "email",
        "quantity",
        "status",
        "unit_price_minor",
        "currency",
        "created_at",
        "cancelled_at",
        // Held orders (issue 13): when the hold ends, when it was confirmed.
        "hold_expires_at",
        "confirmed_at",
        "reason",
        "remaining",
        "capacity",
        "sequence",
    ]
    .into();
    for message in received.values() {
        let keys = message.data.as_object().unwrap().keys();
        for key in keys {
            assert!(allowed.contains(key.as_str()), "payload field {key}");
        }
    }
}

/// (a) A burst on the engine (purchases sold, refused for stock and for the
/// buyer limit, replayed keys), purchases rolled back after writing their
/// outbox rows, and a cancel: the consumer gets exactly the committed
/// changes, once each after dropping duplicates, and nothing else.
#[sqlx::test]
async fn a_consumer_receives_exactly_the_committed_changes(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 16).await;
    let fixture = published_event(
        &pool,
        &[
            TicketSpec::new(12, 2, 2),
            TicketSpec::new(2, 1, 1),
            TicketSpec::new(100, 1, 100),
        ],
    )
    .await;
    let (hot, rollback_tt, marker) = (
        fixture.ticket_type_ids[0],
        fixture.ticket_type_ids[1],
        fixture.ticket_type_ids[2],
    );
    let mut listener = Listener::bind().await;
    let relay = outbox::spawn(pool.clone(), amqp::relay_settings(&amqp::amqp_url()));

    // The engine's burst: 20 buyers want 2 of 12; 5 of them click twice
    // (same key: a replay) and try once more under a new key (limit or
    // sold out). Every try asks for 2: a try for 1 could leave one seat
    // that no remaining request fits, so the count sold would hang on the
    // order the tries ran in.
    let sales = Arc::new(Sales::new(
        pool.clone(),
        Strategy::Batch,
        EngineSettings::default(),
    ));
    let mut requests = Vec::new();
    for i in 0..20 {
        let first = purchase_request(hot, 2, &format!("buyer{i}@example.org"));
        if i < 5 {
            requests.push(first.clone());
            requests.push(purchase_request(hot, 2, &format!("buyer{i}@example.org")));
        }
        requests.push(first);
    }
    let barrier = Arc::new(Barrier::new(requests.len()));
    let tasks: Vec<_> = requests
        .into_iter()
        .map(|request| {
            let (sales, barrier) = (sales.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                sales.purchase(now(), &request).await
            })
        })
        .collect();
    let mut created = Vec::new();
    let mut refused = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(Purchase::Created {
                order,
                cancel_secret,
            }) => created.push((order.id, order.quantity, cancel_secret)),
            Ok(Purchase::Replayed(_)) => {}
            Err(
                AppError::SoldOut | AppError::NotEnoughLeft { .. } | AppError::BuyerLimit { .. },
            ) => refused += 1,
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(common::sold(&pool, hot).await, 12, "sold out");
    assert!(refused > 0);

    // Purchases rolled back after writing their order and outbox rows: 4
    // buyers of 1 seat (of 2) queue on the held row past their inserts; 2 sell,
    // 2 fail their stock UPDATE and roll back.
    let hold = locks::hold_ticket_type(&pool, rollback_tt).await;
    let waiting: Vec<_> = (0..4)
        .map(|i| {
            let pool = pool.clone();
            let request = purchase_request(rollback_tt, 1, &format!("late{i}@example.org"));
            tokio::spawn(async move { sale::purchase(&pool, now(), &request).await })
        })
        .collect();
    locks::wait_until_blocked(&pool, "UPDATE ticket_types", 4).await;
    hold.tx.commit().await.unwrap();
    let mut rolled_back = 0;
    for task in waiting {
        match task.await.unwrap() {
            Ok(_) => {}
            Err(AppError::SoldOut | AppError::NotEnoughLeft { .. }) => rolled_back += 1,
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(rolled_back, 2);

    // A cancel: its order's second message, and the hot type on sale again.
    let (order_id, _, secret) = &created[0];
    sale::cancel(&pool, now(), *order_id, Some(secret))
        .await
        .unwrap();

    settle(&pool, &mut listener, fixture.event_id, marker).await;
    relay.abort();

    let received = listener.deduplicated();
    assert_eq!(
        order_messages(&received),
        expected_order_messages(&pool, fixture.event_id).await,
        "order messages against the orders table"
    );
    assert_availability(&pool, &received, hot).await;
    assert_availability(&pool, &received, rollback_tt).await;
    assert_no_secrets(&received);
    let (order_id, quantity, _) = &created[1];
    let created_message = received
        .values()
        .find(|m| m.order_id == Some(order_id.get()) && m.kind == "order.created")
        .unwrap();
    assert_eq!(created_message.data["quantity"], json!(quantity));
    assert_eq!(created_message.data["status"], json!("confirmed"));
    assert_invariants(&pool).await;
}

/// (b) Seed 003: holders drop and choose again while newcomers choose. A
/// consumer that knows only the message stream counts the seats taken
/// (each order's latest message by sequence): the count is the table's.
#[sqlx::test]
async fn the_seed_003_scenario_replayed_from_the_messages_counts_the_seats_of_the_table(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 16).await;
    let fixture = published_event(
        &pool,
        &[TicketSpec::new(40, 1, 1), TicketSpec::new(10, 1, 10)],
    )
    .await;
    let (course, marker) = (fixture.ticket_type_ids[0], fixture.ticket_type_ids[1]);
    let mut listener = Listener::bind().await;
    let relay = outbox::spawn(pool.clone(), amqp::relay_settings(&amqp::amqp_url()));
    let sales = Arc::new(Sales::new(
        pool.clone(),
        Strategy::Batch,
        EngineSettings::default(),
    ));

    let mut held = Vec::new();
    for i in 0..30 {
        let request = purchase_request(course, 1, &format!("early{i}@example.org"));
        let purchase = sales.purchase(now(), &request).await.unwrap();
        let secret = purchase.cancel_secret().unwrap().clone();
        held.push((
            request.email.as_str().to_owned(),
            purchase.order().id,
            secret,
        ));
    }
    let barrier = Arc::new(Barrier::new(60 + 30));
    let mut tasks = Vec::new();
    for i in 0..60 {
        let (sales, barrier) = (sales.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let request = purchase_request(course, 1, &format!("late{i}@example.org"));
            match sales.purchase(now(), &request).await {
                Ok(_) | Err(AppError::SoldOut | AppError::NotEnoughLeft { .. }) => {}
                Err(other) => panic!("newcomer: {other:?}"),
            }
        }));
    }
    for (email, order_id, secret) in held {
        let (pool, sales, barrier) = (pool.clone(), sales.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let (first, second) = tokio::join!(
                sale::cancel(&pool, now(), order_id, Some(&secret)),
                sale::cancel(&pool, now(), order_id, Some(&secret))
            );
            assert_eq!([&first, &second].iter().filter(|r| r.is_ok()).count(), 1);
            match sales
                .purchase(now(), &purchase_request(course, 1, &email))
                .await
            {
                Ok(_) | Err(AppError::SoldOut | AppError::NotEnoughLeft { .. }) => {}
                Err(other) => panic!("choosing again: {other:?}"),
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    settle(&pool, &mut listener, fixture.event_id, marker).await;
    relay.abort();

    // The consumer's view: per order, the message with the highest
    // sequence wins, whatever order they came in.
    let mut latest: BTreeMap<Uuid, (i64, bool, i64)> = BTreeMap::new();
    for message in listener.deduplicated().values() {
        let Some(order_id) = message.order_id else {
            continue;
        };
        if message.ticket_type_id != Some(course) {
            continue;
        }
        let live = message.kind == "order.created";
        let quantity = message.data["quantity"].as_i64().unwrap();
        let entry = latest.entry(order_id).or_insert((0, live, quantity));
        if message.sequence > entry.0 {
            *entry = (message.sequence, live, quantity);
        }
    }
    let seats_from_messages: i64 = latest
        .values()
        .filter(|(_, live, _)| *live)
        .map(|(_, _, q)| q)
        .sum();
    let (capacity, remaining) = common::capacity_and_remaining(&pool, course).await;
    assert_eq!(seats_from_messages, common::sold(&pool, course).await);
    assert_eq!(seats_from_messages, i64::from(capacity - remaining));
    assert_invariants(&pool).await;
}

/// (c) The broker connection is cut in the middle of a burst (a proxy
/// between relay and broker closes it and refuses new ones), then comes
/// back: every committed order's message arrives.
#[sqlx::test]
async fn a_broker_cut_mid_burst_loses_no_message(_: PgPoolOptions, connect: PgConnectOptions) {
    let pool = pool(connect, 16).await;
    let fixture = published_event(
        &pool,
        &[TicketSpec::new(1000, 1, 1), TicketSpec::new(10, 1, 10)],
    )
    .await;
    let (hot, marker) = (fixture.ticket_type_ids[0], fixture.ticket_type_ids[1]);
    let proxy = Proxy::start(amqp::broker_addr()).await;
    let mut listener = Listener::bind().await;
    let mut settings = amqp::relay_settings(&proxy.url());
    settings.batch = 10;
    let relay = outbox::spawn(pool.clone(), settings);
    let sales = Arc::new(Sales::new(
        pool.clone(),
        Strategy::Batch,
        EngineSettings::default(),
    ));

    let burst = |from: usize, to: usize| {
        let sales = sales.clone();
        tokio::spawn(async move {
            let tasks: Vec<_> = (from..to)
                .map(|i| {
                    let sales = sales.clone();
                    let request = purchase_request(hot, 1, &format!("b{i}@example.org"));
                    tokio::spawn(async move { sales.purchase(now(), &request).await.unwrap() })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
        })
    };
    // The first half, and the relay publishing it...
    let first = burst(0, 150);
    listener
        .until(fixture.event_id, |received| !received.is_empty())
        .await;
    // ...when the connection goes, with purchases still coming.
    proxy.cut().await;
    let second = burst(150, 300);
    first.await.unwrap();
    second.await.unwrap();
    let unsent: i64 =
        sqlx::query_scalar("SELECT count(*) FROM outbox_behind('amqp') WHERE event_id = $1")
            .bind(fixture.event_id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(unsent > 0, "the cut left nothing unsent: no test");
    proxy.restore();

    settle(&pool, &mut listener, fixture.event_id, marker).await;
    relay.abort();
    let received = listener.deduplicated();
    assert_eq!(
        order_messages(&received),
        expected_order_messages(&pool, fixture.event_id).await
    );
    assert_eq!(common::sold(&pool, hot).await, 300);
}

/// (d) The app is killed (SIGKILL) after a purchase committed and before
/// its message went out (its relay cannot reach the broker): started again
/// with the broker, it publishes the message.
#[sqlx::test]
async fn an_app_killed_between_commit_and_publish_publishes_after_restart(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect.clone(), 4).await;
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let url = database_url(&connect);
    let mut listener = Listener::bind().await;
    // A broker address that refuses every connection.
    let proxy = Proxy::start(amqp::broker_addr()).await;
    proxy.cut().await;
    let unreachable = proxy.url();

    let server = ServerProcess::start(&url, &["--amqp-url", &unreachable]).await;
    let response = reqwest::Client::new()
        .post(server.url("/api/v1/orders"))
        .json(&json!({
            "ticket_type_id": fixture.ticket_type_id(),
            "quantity": 2,
            "email": "killed@example.org",
            "idempotency_key": Uuid::new_v4().to_string(),
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let body: serde_json::Value = response.json().await.unwrap();
    let order_id = Uuid::parse_str(body["id"].as_str().unwrap()).unwrap();
    let unsent: i64 =
        sqlx::query_scalar("SELECT count(*) FROM outbox_behind('amqp') WHERE order_id = $1")
            .bind(order_id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(unsent, 1, "committed, not published");
    drop(server); // SIGKILL, and reaped

    let server = ServerProcess::start(&url, &["--amqp-url", &amqp::amqp_url()]).await;
    listener
        .until_order(fixture.event_id, "order.created", order_id)
        .await;
    let message = listener
        .received
        .iter()
        .find(|m| m.order_id == Some(order_id))
        .unwrap();
    assert_eq!(message.sequence, 1);
    assert_eq!(message.data["quantity"], json!(2));
    drop(server);
}

/// (e) Two relays on one database, each claiming small batches of the same
/// backlog at once: no row is sent by both (no message id arrives twice)
/// and every row is sent.
#[sqlx::test]
async fn two_relays_on_one_database_never_send_a_row_twice(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 16).await;
    let fixture = published_event(
        &pool,
        &[TicketSpec::new(1000, 1, 1), TicketSpec::new(10, 1, 10)],
    )
    .await;
    let (hot, marker) = (fixture.ticket_type_ids[0], fixture.ticket_type_ids[1]);
    let sales = Arc::new(Sales::new(
        pool.clone(),
        Strategy::Batch,
        EngineSettings::default(),
    ));
    // The backlog first, with no relay running.
    let tasks: Vec<_> = (0..300)
        .map(|i| {
            let sales = sales.clone();
            let request = purchase_request(hot, 1, &format!("b{i}@example.org"));
            tokio::spawn(async move { sales.purchase(now(), &request).await.unwrap() })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let mut listener = Listener::bind().await;
    let mut settings = amqp::relay_settings(&amqp::amqp_url());
    settings.batch = 5;
    let relays = [
        outbox::spawn(pool.clone(), settings.clone()),
        outbox::spawn(pool.clone(), settings),
    ];
    settle(&pool, &mut listener, fixture.event_id, marker).await;
    for relay in relays {
        relay.abort();
    }
    let mut seen = BTreeSet::new();
    let twice: Vec<_> = listener
        .received
        .iter()
        .filter(|m| !seen.insert(m.id))
        .map(|m| (m.kind.clone(), m.order_id))
        .collect();
    assert!(twice.is_empty(), "sent twice: {twice:?}");
    assert_eq!(
        order_messages(&listener.deduplicated()),
        expected_order_messages(&pool, fixture.event_id).await
    );
}

/// The outbox's readers go in log order, (transaction id, position), and
/// only past transactions that have ended: a row whose transaction commits
/// after a later-numbered one (its position was drawn first) is read when
/// it commits, not skipped behind a cursor that moved on. (Without the
/// horizon, the first read takes the later row and the cursor passes the
/// earlier one for good.)
#[sqlx::test]
async fn a_row_that_commits_late_is_read_and_not_skipped(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    use stampede::db::outbox::{Consumer, move_cursor, read_after_cursor};

    let pool = pool(connect, 4).await;
    let fixture = published_event(&pool, &[TicketSpec::new(10, 1, 10)]).await;
    let write = "INSERT INTO outbox (kind, event_id, sequence, payload)
                 VALUES ('event.cancelled', $1, $2, '{}') RETURNING id";
    // One consumer round: read, move the cursor past what was read, commit.
    let round = async || {
        let mut tx = pool.begin().await.unwrap();
        let rows = read_after_cursor(&mut tx, Consumer::Webhooks, 100)
            .await
            .unwrap();
        if let Some(last) = rows.last() {
            move_cursor(&mut tx, Consumer::Webhooks, last)
                .await
                .unwrap();
        }
        tx.commit().await.unwrap();
        rows.into_iter()
            .filter(|row| row.event_id == fixture.event_id)
            .map(|row| row.id)
            .collect::<Vec<Uuid>>()
    };
    // The rows the fixture wrote (none expected, but keep the test exact).
    round().await;

    let mut late = pool.begin().await.unwrap();
    let early: Uuid = sqlx::query_scalar(write)
        .bind(fixture.event_id)
        .bind(1_i64)
        .fetch_one(&mut *late)
        .await
        .unwrap();
    let later: Uuid = sqlx::query_scalar(write)
        .bind(fixture.event_id)
        .bind(2_i64)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        round().await,
        Vec::<Uuid>::new(),
        "nothing is read while a transaction that began writing first is open"
    );
    late.commit().await.unwrap();
    // Other tests' writing transactions on this server hold the horizon
    // back too: read until both rows came (bounded).
    let mut read = Vec::new();
    for _ in 0..600 {
        read.extend(round().await);
        if read.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    read.extend(round().await);
    assert_eq!(
        read,
        vec![early, later],
        "both rows, each once, in log order"
    );
}
