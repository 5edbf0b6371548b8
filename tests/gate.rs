//! The Redis gate (issue 9) under faults, against real Redis and Postgres:
//! a crash between the gate and the commit, Redis flushed, stopped and
//! started again mid-sale, one buyer hammering. Never an oversell (checked
//! from the tables), and every ticket sells in the end.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{
    TicketSpec, assert_invariants, database_url,
    gate::{PREFIX, gated, gated_with, own_gate, setup, shared_redis},
    locks::{blocked, hold_ticket_type, lock_table, wait_until_blocked},
    now, pool,
    process::ServerProcess,
    published_event,
    purchase::{fresh_key, request},
    redis_servers::OwnRedis,
    sold, until_listening,
};
use deadpool_redis::redis;
use futures::StreamExt as _;
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use stampede::{
    domain::{BuyerKey, Email},
    error::AppError,
    sale::{EngineSettings, GateRedis, GateSettings, Purchase, Sales, Strategy},
};
use uuid::Uuid;

/// Buy one ticket each under fresh buyers until `n` are sold or `tries` run out.
async fn buy_until(sales: &Sales, pool: &PgPool, tt: Uuid, n: i64, tries: usize, tag: &str) {
    for i in 0..tries {
        if sold(pool, tt).await >= n {
            return;
        }
        let req = request(tt, 1, &format!("{tag}{i}@example.org"), &fresh_key());
        match sales.purchase(now(), &req).await {
            Ok(_) | Err(AppError::SoldOut | AppError::NotEnoughLeft { .. }) => {}
            Err(err) => panic!("{err:?}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The app "killed" between the gate and the commit: Redis counted two
/// purchases that Postgres never saw (simulated by lowering the counter as
/// those admissions would have). Redis refuses as sold out meanwhile, never
/// oversells, and the periodic rebuild puts both tickets back on sale.
#[sqlx::test]
async fn admissions_never_written_are_sold_again_after_a_reconcile(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = setup(connect, TicketSpec::new(3, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let sales = gated(&pool, &shared_redis(), Duration::from_millis(700));
    // A listener that connects late marks the types seen for a rebuild,
    // which would undo the lowered counter below before it is tried.
    until_listening(&pool, 2).await;
    sales
        .purchase(now(), &request(tt, 1, "first@example.org", &fresh_key()))
        .await
        .unwrap();
    let redis = redis::Client::open(shared_redis()).unwrap();
    let mut conn = redis.get_multiplexed_async_connection().await.unwrap();
    let stock = format!("{PREFIX}{{tt:{tt}}}:stock");
    // Two admissions counted, never written: nothing left in Redis.
    let _: i64 = redis::cmd("HSET")
        .arg(&stock)
        .arg("left")
        .arg(0)
        .query_async(&mut conn)
        .await
        .unwrap();
    let refused = sales
        .purchase(now(), &request(tt, 1, "second@example.org", &fresh_key()))
        .await;
    assert!(matches!(refused, Err(AppError::SoldOut)), "{refused:?}");
    assert_eq!(sold(&pool, tt).await, 1);

    buy_until(&sales, &pool, tt, 3, 200, "later").await;
    assert_eq!(
        sold(&pool, tt).await,
        3,
        "tickets left unsold after a reconcile"
    );
    assert_invariants(&pool).await;
    let _: i64 = redis::cmd("DEL")
        .arg(&stock)
        .query_async(&mut conn)
        .await
        .unwrap();
}

/// Redis flushed mid-sale, then stopped and started again (empty): the gate
/// rebuilds from Postgres before admitting, sells from Postgres alone while
/// Redis is down, and every ticket sells exactly once.
#[sqlx::test]
async fn redis_flushed_then_restarted_mid_sale_never_oversells(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, tt, mut own, sales) = own_gate(
        connect,
        TicketSpec::new(30, 1, 1),
        Duration::from_secs(3600),
    )
    .await;

    buy_until(&sales, &pool, tt, 10, 100, "a").await;
    assert_eq!(sold(&pool, tt).await, 10);
    let _: String = own.cmd(&mut redis::cmd("FLUSHALL")).await.unwrap();
    buy_until(&sales, &pool, tt, 20, 100, "b").await;
    assert_eq!(sold(&pool, tt).await, 20);
    let admitted_before_stop = sales.gate().unwrap().admitted();

    own.stop();
    buy_until(&sales, &pool, tt, 25, 100, "c").await;
    assert_eq!(sold(&pool, tt).await, 25, "no sales while Redis was down");
    assert_eq!(
        sales.gate().unwrap().admitted(),
        admitted_before_stop,
        "admitted with Redis down"
    );

    let port = own.port;
    drop(own);
    let own = OwnRedis::start_on(port);
    own.until_up().await;
    // Everyone else: the remaining five, and more buyers than tickets.
    for i in 0..40 {
        let req = request(tt, 1, &format!("d{i}@example.org"), &fresh_key());
        match sales.purchase(now(), &req).await {
            Ok(_) | Err(AppError::SoldOut | AppError::NotEnoughLeft { .. }) => {}
            Err(err) => panic!("{err:?}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(sold(&pool, tt).await, 30);
    assert!(
        sales.gate().unwrap().admitted() > admitted_before_stop,
        "the gate never came back"
    );
    // Rebuilt after the restart (an upper bound: a rebuild racing the last
    // commit may leave it a ticket high, which Postgres would refuse).
    let left: String = own
        .cmd(
            redis::cmd("HGET")
                .arg(format!("{PREFIX}{{tt:{tt}}}:stock"))
                .arg("left"),
        )
        .await
        .unwrap();
    assert!(left.parse::<i64>().unwrap() <= 1, "left {left}");
    assert_invariants(&pool).await;
}

/// One buyer hammering, with one key and with fresh keys, among other
/// buyers: never more than the limit, one order per key, the others buy.
#[sqlx::test]
async fn one_buyer_hammering_cannot_drain_the_gate(_: PgPoolOptions, connect: PgConnectOptions) {
    let (pool, fixture) = setup(connect, TicketSpec::new(10, 2, 2)).await;
    let tt = fixture.ticket_type_id();
    let sales = gated(&pool, &shared_redis(), Duration::from_secs(3600));
    let key = fresh_key();
    let mut tasks = Vec::new();
    for i in 0..200 {
        let sales = sales.clone();
        let req = match i % 4 {
            0 => request(tt, 1, "scalper@example.org", &key),
            1 => request(tt, 1, "Scalper+bot@example.org", &fresh_key()),
            2 => request(tt, 2, "scalper@example.org", &fresh_key()),
            _ => request(tt, 1, &format!("fan{i}@example.org"), &fresh_key()),
        };
        tasks.push(tokio::spawn(
            async move { sales.purchase(now(), &req).await },
        ));
    }
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    for answer in &answers {
        match answer {
            Ok(_)
            | Err(
                AppError::SoldOut | AppError::NotEnoughLeft { .. } | AppError::BuyerLimit { .. },
            ) => {}
            other => panic!("{other:?}"),
        }
    }
    assert_invariants(&pool).await;
    let scalper: i64 = sqlx::query_scalar(
        "SELECT COALESCE(sum(quantity), 0) FROM orders
         WHERE ticket_type_id = $1 AND email ILIKE 'scalper%'",
    )
    .bind(tt)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(scalper <= 2, "the scalper holds {scalper}");
    // The other buyers got the rest: all ten sold.
    assert_eq!(sold(&pool, tt).await, 10);
    let created = answers
        .iter()
        .filter(|a| matches!(a, Ok(Purchase::Created { .. })))
        .count();
    assert!(created >= 8);
    // Counted in Redis no more than the tickets plus the scalper's limit.
    let admitted = sales.gate().unwrap().admitted();
    assert!(admitted <= 12, "{admitted} admitted");
}

/// The organizer raises the limits: the gate hears it from Postgres and
/// rebuilds at once, long before its periodic reconcile (an hour here), so
/// a buyer at the old limit is not refused by Redis under the new one.
#[sqlx::test]
async fn raised_limits_reach_the_gate_without_waiting_for_the_reconcile(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = setup(connect, TicketSpec::new(10, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let sales = gated(&pool, &shared_redis(), Duration::from_secs(3600));
    sales
        .purchase(now(), &request(tt, 1, "fan@example.org", &fresh_key()))
        .await
        .unwrap();
    let refused = sales
        .purchase(now(), &request(tt, 1, "fan@example.org", &fresh_key()))
        .await;
    assert!(
        matches!(refused, Err(AppError::BuyerLimit { .. })),
        "{refused:?}"
    );
    let refused = sales
        .purchase(now(), &request(tt, 2, "other@example.org", &fresh_key()))
        .await;
    assert!(
        matches!(refused, Err(AppError::OrderLimit { .. })),
        "{refused:?}"
    );

    sqlx::query("UPDATE ticket_types SET max_per_order = 2, max_per_buyer = 3 WHERE id = $1")
        .bind(tt)
        .execute(&pool)
        .await
        .unwrap();
    let admitted = sales.gate().unwrap().admitted();
    // The notification arrives at commit; allow it a few seconds.
    let mut answer = Err(AppError::Overloaded);
    for _ in 0..50 {
        answer = sales
            .purchase(now(), &request(tt, 2, "fan@example.org", &fresh_key()))
            .await;
        if answer.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        matches!(answer, Ok(Purchase::Created { .. })),
        "still refused under the raised limits: {answer:?}"
    );
    // Admitted by the rebuilt gate, not sent around it.
    assert_eq!(sales.gate().unwrap().admitted(), admitted + 1);
    assert_eq!(sold(&pool, tt).await, 3);
    assert_invariants(&pool).await;
}

/// Redis refuses a retry whose admission record is gone (expired, or lost
/// with Redis's data) by the buyer's limit: the buyer holds tickets, so the
/// refusal may be that purchase's retry, and Postgres replays its order. A
/// buyer who holds nothing is refused from Redis alone: with the orders
/// table locked, the refusal still answers (a replay read would wait).
#[sqlx::test]
async fn a_refused_retry_replays_only_for_a_buyer_who_holds_tickets(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = setup(connect, TicketSpec::new(10, 2, 2)).await;
    let tt = fixture.ticket_type_id();
    let sales = gated(&pool, &shared_redis(), Duration::from_secs(3600));
    // A listener that connects late clears the sold-out flags and marks
    // the types stale (a missed notification): not during the lock below.
    until_listening(&pool, 2).await;
    let key = fresh_key();
    let bought = sales
        .purchase(now(), &request(tt, 2, "fan@example.org", &key))
        .await
        .unwrap();
    let Purchase::Created { order, .. } = bought else {
        panic!("{bought:?}")
    };
    let redis = redis::Client::open(shared_redis()).unwrap();
    let mut conn = redis.get_multiplexed_async_connection().await.unwrap();
    // The admission record gone, and the counts with it: the gate rebuilds
    // them from Postgres, which knows the order but not its key.
    let mut gone: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{PREFIX}{{tt:{tt}}}:key:*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(gone.len(), 1, "{gone:?}");
    gone.push(format!("{PREFIX}{{tt:{tt}}}:stock"));
    let _: i64 = redis::cmd("DEL")
        .arg(&gone)
        .query_async(&mut conn)
        .await
        .unwrap();

    let retried = sales
        .purchase(now(), &request(tt, 2, "fan@example.org", &key))
        .await;
    match retried {
        Ok(Purchase::Replayed(replayed)) => assert_eq!(replayed.id, order.id),
        other => panic!("the retry was not replayed: {other:?}"),
    }

    let lock = lock_table(&pool, "orders").await;
    let refused = tokio::time::timeout(
        Duration::from_secs(5),
        sales.purchase(now(), &request(tt, 3, "other@example.org", &fresh_key())),
    )
    .await;
    // Released before any assertion: a failing test then ends, rather than
    // leave a purchase waiting on the lock while the test database drops.
    lock.rollback().await.unwrap();
    let refused = refused.expect("a refusal of a buyer holding nothing waited on the orders table");
    assert!(
        matches!(refused, Err(AppError::OrderLimit { max: 2 })),
        "{refused:?}"
    );
    assert_eq!(sold(&pool, tt).await, 2);
    assert_invariants(&pool).await;
}

/// The stock hash of a ticket type, field by field.
async fn stock_hash(
    conn: &mut redis::aio::MultiplexedConnection,
    tt: Uuid,
) -> std::collections::HashMap<String, String> {
    redis::cmd("HGETALL")
        .arg(format!("{PREFIX}{{tt:{tt}}}:stock"))
        .query_async(conn)
        .await
        .unwrap()
}

/// A buyer's field in the stock hash (the folded buyer key).
fn buyer(email: &str) -> String {
    format!("b:{}", BuyerKey::from(&Email::parse(email).unwrap()))
}

/// The generation rule. A is admitted under generation G and waits on the
/// ticket type's row; Redis loses the hash, so B's purchase rebuilds it
/// from Postgres (generation G', which does not count A) and is admitted,
/// and B's twin (same key) goes on as a replay. Then Postgres refuses all
/// three (the event unpublished under them). A's give-back must not add
/// its two tickets back (the rebuild never took them out: Redis would
/// offer more than Postgres has); B's adds its ticket back exactly once
/// (the twin gives nothing back). Redis ends equal to Postgres.
#[sqlx::test]
async fn a_give_back_from_an_older_generation_adds_nothing(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = setup(connect, TicketSpec::new(10, 2, 4)).await;
    let tt = fixture.ticket_type_id();
    let settings = GateSettings {
        prefix: PREFIX.into(),
        timeout: Duration::from_secs(1),
        reconcile_every: Duration::from_secs(3600),
        ..GateSettings::default()
    };
    // One transaction per purchase, so that each waits in Postgres visibly.
    let sales = Sales::new(pool.clone(), Strategy::Naive, EngineSettings::default())
        .with_gate(GateRedis::Server(shared_redis()), settings)
        .unwrap();
    // Both stock listeners (the sold-out flags' and the gate's) up, so that
    // the gate's rebuild on their (re)connection is behind us.
    until_listening(&pool, 2).await;
    sales
        .purchase(now(), &request(tt, 1, "first@example.org", &fresh_key()))
        .await
        .unwrap();
    let client = redis::Client::open(shared_redis()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let first = stock_hash(&mut conn, tt).await;
    assert_eq!(first["left"], "9", "{first:?}");

    let mut hold = hold_ticket_type(&pool, tt).await;
    let spawn = |quantity, email: &str, key: &str| {
        let sales = sales.clone();
        let req = request(tt, quantity, email, key);
        tokio::spawn(async move { sales.purchase(now(), &req).await })
    };
    let a = spawn(2, "a@example.org", &fresh_key());
    wait_until_blocked(&pool, "UPDATE ticket_types", 1).await;
    let admitted_a = stock_hash(&mut conn, tt).await;
    assert_eq!(admitted_a["gen"], first["gen"]);
    assert_eq!(admitted_a["left"], "7");
    assert_eq!(admitted_a[&buyer("a@example.org")], "2");

    // Redis loses the hash: the next purchase rebuilds it from Postgres.
    let _: i64 = redis::cmd("DEL")
        .arg(format!("{PREFIX}{{tt:{tt}}}:stock"))
        .query_async(&mut conn)
        .await
        .unwrap();
    let key_b = fresh_key();
    let b = spawn(1, "b@example.org", &key_b);
    wait_until_blocked(&pool, "UPDATE ticket_types", 2).await;
    let b_twin = spawn(1, "b@example.org", &key_b);
    // The twin waits on B's key in the order insert (sql/sale/insert_order.sql).
    wait_until_blocked(&pool, "WITH new_order AS", 1).await;
    let admitted_b = stock_hash(&mut conn, tt).await;
    assert_ne!(admitted_b["gen"], first["gen"], "no rebuild");
    // Rebuilt from Postgres (9 left, A not counted), then B took one.
    assert_eq!(admitted_b["left"], "8");
    assert_eq!(admitted_b[&buyer("b@example.org")], "1");
    assert!(!admitted_b.contains_key(&buyer("a@example.org")));

    // Postgres refuses all three.
    sqlx::query("UPDATE events SET status = 'draft' WHERE id = $1")
        .bind(fixture.event_id)
        .execute(&mut *hold.tx)
        .await
        .unwrap();
    hold.tx.commit().await.unwrap();
    for task in [a, b, b_twin] {
        let refused = task.await.unwrap();
        assert!(matches!(refused, Err(AppError::NotFound)), "{refused:?}");
    }

    let after = stock_hash(&mut conn, tt).await;
    assert_eq!(after["gen"], admitted_b["gen"]);
    let remaining = common::remaining(&pool, tt).await;
    assert_eq!(remaining, 9);
    assert_eq!(
        after["left"],
        remaining.to_string(),
        "Redis offers other than Postgres has: {after:?}"
    );
    assert!(!after.contains_key(&buyer("a@example.org")), "{after:?}");
    assert!(!after.contains_key(&buyer("b@example.org")), "{after:?}");
    assert_eq!(after[&buyer("first@example.org")], "1");
    assert_eq!(sold(&pool, tt).await, 1);
    assert_invariants(&pool).await;
    let _: i64 = redis::cmd("DEL")
        .arg(format!("{PREFIX}{{tt:{tt}}}:stock"))
        .query_async(&mut conn)
        .await
        .unwrap();
}

/// A counter of `/metrics` (0 when it has not been counted yet).
async fn counter(server: &ServerProcess, series: &str) -> f64 {
    let text = reqwest::get(server.url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Three `stampede serve` processes on one database and one gate (same
/// Redis, same prefix), a burst spread over them: 150 buyers for 40
/// tickets, 20 keys each sent three times (to three processes), one buyer
/// over the limit with fresh keys. From the tables: nothing oversold,
/// each key at most one order (and every answer for it names that order),
/// the limit held, every ticket sold; and the gate refused most of it.
#[sqlx::test]
async fn three_app_processes_share_the_gate(_: PgPoolOptions, connect: PgConnectOptions) {
    let (pool, fixture) = setup(connect.clone(), TicketSpec::new(40, 2, 2)).await;
    let tt = fixture.ticket_type_id();
    let url = database_url(&connect);
    let redis = shared_redis();
    let prefix = format!("stampede:test:processes:{}:", Uuid::new_v4());
    let args = [
        "--redis-gate",
        "--redis-url",
        &redis,
        "--redis-gate-prefix",
        &prefix,
        "--redis-gate-timeout-ms",
        "1000",
        "--purchase-burst-per-ip",
        "0",
    ];
    let servers = [
        ServerProcess::start(&url, &args).await,
        ServerProcess::start(&url, &args).await,
        ServerProcess::start(&url, &args).await,
    ];

    let mut buyers: Vec<(String, String, u8)> = Vec::new();
    for i in 0..150 {
        buyers.push((format!("fan{i}@example.org"), fresh_key(), 1));
    }
    for i in 0..20 {
        let key = fresh_key();
        for _ in 0..3 {
            buyers.push((format!("again{i}@example.org"), key.clone(), 1));
        }
    }
    for i in 0..12 {
        buyers.push(("Hog+x@example.org".into(), fresh_key(), 1 + i % 2));
    }
    let client = reqwest::Client::new();
    let answers: Vec<(String, String, u16, Option<String>)> =
        futures::stream::iter(buyers.into_iter().enumerate())
            .map(|(i, (email, key, quantity))| {
                let request =
                    client
                        .post(servers[i % 3].url("/api/v1/orders"))
                        .json(&serde_json::json!({
                            "ticket_type_id": tt,
                            "quantity": quantity,
                            "email": email,
                            "idempotency_key": key,
                        }));
                async move {
                    let response = request.send().await.unwrap();
                    let status = response.status().as_u16();
                    let body: serde_json::Value = response.json().await.unwrap();
                    let order = body["id"].as_str().map(str::to_owned);
                    (email, key, status, order)
                }
            })
            .buffer_unordered(64)
            .collect()
            .await;

    for (email, _, status, _) in &answers {
        assert!(
            [200, 201, 409].contains(status),
            "{email}: {status} from a process"
        );
    }
    assert_invariants(&pool).await;
    assert_eq!(sold(&pool, tt).await, 40, "tickets left unsold");
    // Each key: at most one order, and every answer with an order names it.
    let mut by_key: std::collections::HashMap<&str, std::collections::BTreeSet<&str>> =
        std::collections::HashMap::new();
    for (_, key, _, order) in &answers {
        if let Some(order) = order {
            by_key
                .entry(key.as_str())
                .or_default()
                .insert(order.as_str());
        }
    }
    assert!(
        by_key.values().all(|orders| orders.len() == 1),
        "{by_key:?}"
    );
    let hog: i64 = sqlx::query_scalar(
        "SELECT COALESCE(sum(quantity), 0) FROM orders
         WHERE ticket_type_id = $1 AND email = 'Hog+x@example.org' AND status = 'confirmed'",
    )
    .bind(tt)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(hog <= 2, "the hog holds {hog}");

    // The gate was shared: purchases refused from Redis, and about as many
    // admitted (over the three processes) as there are tickets.
    let (mut admitted, mut refused) = (0.0, 0.0);
    for server in &servers {
        admitted += counter(server, r#"stampede_gate_total{outcome="admitted"}"#).await;
        refused += counter(server, r#"stampede_gate_total{outcome="sold_out"}"#).await;
    }
    assert!(refused > 0.0, "nothing refused from Redis");
    assert!(admitted >= 1.0, "nothing admitted");
    assert!(
        admitted <= 40.0 + 2.0 * 20.0,
        "{admitted} admitted for 40 tickets"
    );
}

/// After the sell-out, a buyer whose key the gate never admitted and who
/// holds no tickets is refused without a read in Postgres (here: the orders
/// table locked by another transaction would block any read), while a
/// retry of a committed purchase still gets its order back.
#[sqlx::test]
async fn after_the_sell_out_the_gate_spares_postgres_the_refusals(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = setup(connect, TicketSpec::new(2, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let sales = gated(&pool, &shared_redis(), Duration::from_secs(3600));
    // A listener that connects late clears the sold-out flags and marks
    // the types stale (a missed notification): not during the lock below.
    until_listening(&pool, 2).await;
    let first = request(tt, 1, "first@example.org", &fresh_key());
    sales.purchase(now(), &first).await.unwrap();
    sales
        .purchase(now(), &request(tt, 1, "second@example.org", &fresh_key()))
        .await
        .unwrap();
    // Postgres tells this instance it is sold out: its flag is set.
    let refused = sales
        .purchase(now(), &request(tt, 1, "third@example.org", &fresh_key()))
        .await;
    assert!(matches!(refused, Err(AppError::SoldOut)), "{refused:?}");
    assert!(sales.known_sold_out(tt.into()));

    let blocker = lock_table(&pool, "orders").await;
    let refused = tokio::time::timeout(
        Duration::from_secs(5),
        sales.purchase(now(), &request(tt, 1, "fourth@example.org", &fresh_key())),
    )
    .await;
    // Released before any assertion: a failing test then ends, rather than
    // leave a purchase waiting on the lock while the test database drops.
    blocker.rollback().await.unwrap();
    let refused = refused.expect("the refusal waited for Postgres");
    assert!(matches!(refused, Err(AppError::SoldOut)), "{refused:?}");

    let replayed = sales.purchase(now(), &first).await;
    assert!(
        matches!(replayed, Ok(Purchase::Replayed(_))),
        "{replayed:?}"
    );
    assert_eq!(sold(&pool, tt).await, 2);
    assert_invariants(&pool).await;
}

/// Wait until `sales` refuses the type without any read, asking with fresh
/// buyers (each refusal may be what tells the instance).
async fn until_refusing_without_reading(sales: &Sales, tt: Uuid, tag: &str) {
    for i in 0..200 {
        if sales.refuses_without_reading(tt.into()) {
            return;
        }
        let refused = sales
            .purchase(
                now(),
                &request(tt, 1, &format!("{tag}{i}@example.org"), &fresh_key()),
            )
            .await;
        assert!(matches!(refused, Err(AppError::SoldOut)), "{refused:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the instance never learned that the type is sold out");
}

/// An instance that never sold the type hears from Redis that it is sold
/// out, checks Postgres once, and from then on refuses it with neither:
/// with Redis stopped and the orders table locked (any read would block, a
/// fall back to Postgres too), a fresh buyer is still refused at once. A
/// retry of a purchase that another instance committed still gets its order.
#[sqlx::test]
async fn once_postgres_agrees_refusals_need_neither_redis_nor_postgres(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = setup(connect, TicketSpec::new(2, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let mut own = OwnRedis::start();
    own.until_up().await;
    let seller = gated(&pool, &own.url(), Duration::from_secs(3600));
    let other = gated(&pool, &own.url(), Duration::from_secs(3600));
    let first = request(tt, 1, "first@example.org", &fresh_key());
    seller.purchase(now(), &first).await.unwrap();
    seller
        .purchase(now(), &request(tt, 1, "second@example.org", &fresh_key()))
        .await
        .unwrap();
    assert!(!other.known_sold_out(tt.into()), "it never sold the type");

    until_refusing_without_reading(&other, tt, "late").await;
    own.stop();
    let blocker = lock_table(&pool, "orders").await;
    let refused = tokio::time::timeout(
        Duration::from_secs(5),
        other.purchase(now(), &request(tt, 1, "fresh@example.org", &fresh_key())),
    )
    .await;
    // Released before any assertion: a failing test then ends, rather than
    // leave a purchase waiting on the lock while the test database drops.
    blocker.rollback().await.unwrap();
    let refused = refused.expect("the refusal waited for Redis or Postgres");
    assert!(matches!(refused, Err(AppError::SoldOut)), "{refused:?}");

    let replayed = other.purchase(now(), &first).await;
    assert!(
        matches!(&replayed, Ok(Purchase::Replayed(order)) if order.email == "first@example.org"),
        "{replayed:?}"
    );
    assert_eq!(sold(&pool, tt).await, 2);
    assert_invariants(&pool).await;
}

/// Redis says none left while an admitted purchase is still on its way to
/// Postgres: the instance must not take Redis's word for a sell-out. Here
/// the counter is emptied by hand (as a crash between gate and commit would
/// leave it) while Postgres still has the ticket: refusals come from Redis,
/// and Postgres, asked, keeps the instance from setting its flag.
#[sqlx::test]
async fn a_low_redis_count_alone_sets_no_sold_out_flag(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, tt, own, sales) =
        own_gate(connect, TicketSpec::new(1, 1, 1), Duration::from_secs(3600)).await;
    // The first refusal builds the counter (after the reconciler's first
    // round, which would undo the change below); then it is emptied.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let probe = request(tt, 2, "probe@example.org", &fresh_key());
    let refused = sales.purchase(now(), &probe).await;
    assert!(refused.is_err(), "{refused:?}");
    let stock: String = format!("{PREFIX}{{tt:{tt}}}:stock");
    let _: i64 = own
        .cmd(redis::cmd("HSET").arg(&stock).arg("left").arg(0))
        .await
        .unwrap();
    for i in 0..5 {
        let refused = sales
            .purchase(
                now(),
                &request(tt, 1, &format!("r{i}@example.org"), &fresh_key()),
            )
            .await;
        assert!(matches!(refused, Err(AppError::SoldOut)), "{refused:?}");
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    assert!(
        !sales.known_sold_out(tt.into()),
        "Redis's count alone set the flag"
    );
    assert_eq!(sold(&pool, tt).await, 0);
    assert_invariants(&pool).await;
}

/// Hold every command to `own` for `held` (`CLIENT PAUSE ... ALL`: Redis is
/// up and takes connections, but answers nothing until then); returns when
/// the pause ends.
async fn pause_redis(own: &OwnRedis, held: Duration) -> tokio::time::Instant {
    let _: String = own
        .cmd(
            redis::cmd("CLIENT")
                .arg("PAUSE")
                .arg(held.as_millis() as u64)
                .arg("ALL"),
        )
        .await
        .unwrap();
    tokio::time::Instant::now() + held
}

/// One buyer after another, each buying one ticket.
struct Buyers<'a> {
    sales: &'a Sales,
    tt: Uuid,
    bought: i64,
}

impl Buyers<'_> {
    async fn buy(&mut self, tag: &str) {
        let email = format!("{tag}{}@example.org", self.bought);
        let created = self
            .sales
            .purchase(now(), &request(self.tt, 1, &email, &fresh_key()))
            .await;
        assert!(
            matches!(created, Ok(Purchase::Created { .. })),
            "{created:?}"
        );
        self.bought += 1;
    }

    /// Until a purchase goes through the gate.
    async fn until_admitted(&mut self) {
        let gate = self.sales.gate().unwrap();
        let before = gate.admitted();
        for _ in 0..20 {
            self.buy("through").await;
            if gate.admitted() > before {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no purchase went through the gate");
    }
}

/// Redis up but slow (every command held by `CLIENT PAUSE`). One late
/// answer costs its purchase the gate's timeout and sends it to Postgres
/// alone, and the gate stays in use; only 16 late answers in a row take it
/// aside, after which purchases go to Postgres without asking Redis; once
/// Redis answers again the gate is back. Every purchase sells, exactly once.
#[sqlx::test]
async fn a_slow_redis_costs_a_purchase_its_timeout_and_only_a_run_of_them_trips_the_gate(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    const TIMEOUTS_TO_TRIP: usize = 16;
    let (pool, fixture) = setup(connect, TicketSpec::new(200, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let own = OwnRedis::start();
    own.until_up().await;
    let settings = GateSettings {
        prefix: PREFIX.into(),
        timeout: Duration::from_millis(250),
        reconcile_every: Duration::from_secs(3600),
        retry_after: Duration::from_secs(2),
        ..GateSettings::default()
    };
    let sales = gated_with(&pool, &own.url(), settings);
    // A listener that connects late marks the types seen for a rebuild,
    // which the slow purchase below would then make first.
    until_listening(&pool, 2).await;
    let gate = sales.gate().unwrap();
    let mut buyers = Buyers {
        sales: &sales,
        tt,
        bought: 0,
    };
    buyers.until_admitted().await;

    // One slow answer: its purchase sells from Postgres, the gate stays.
    let admitted = gate.admitted();
    let resumes = pause_redis(&own, Duration::from_secs(1)).await;
    buyers.buy("slow").await;
    assert_eq!(gate.admitted(), admitted, "admitted while Redis was held");
    assert!(
        !gate.standing_aside(),
        "one late answer took the gate aside"
    );
    tokio::time::sleep_until(resumes).await;
    buyers.until_admitted().await;
    assert!(!gate.standing_aside());

    // Slow for good: a run of late answers takes the gate aside, and the
    // purchases after it do not ask Redis at all.
    let admitted = gate.admitted();
    let scripts_before = own.scripts_run().await;
    let resumes = pause_redis(&own, Duration::from_secs(20)).await;
    for late in 0..TIMEOUTS_TO_TRIP {
        assert!(!gate.standing_aside(), "aside after {late} late answers");
        buyers.buy("held").await;
    }
    assert!(
        gate.standing_aside(),
        "{TIMEOUTS_TO_TRIP} late answers in a row"
    );
    for _ in 0..10 {
        buyers.buy("aside").await;
    }
    assert!(
        tokio::time::Instant::now() < resumes,
        "the purchases outlasted the pause: the test proves nothing"
    );
    assert_eq!(gate.admitted(), admitted, "admitted while Redis was held");
    // The held calls run when the pause ends; the purchases aside sent none.
    tokio::time::sleep_until(resumes + Duration::from_millis(300)).await;
    assert_eq!(
        own.scripts_run().await - scripts_before,
        TIMEOUTS_TO_TRIP as i64,
        "scripts sent while Redis was held"
    );

    // Redis answers again: the gate is back after its retry interval.
    tokio::time::sleep(Duration::from_secs(2)).await;
    buyers.until_admitted().await;
    assert!(!gate.standing_aside());
    assert_eq!(sold(&pool, tt).await, buyers.bought);
    assert_invariants(&pool).await;
}

/// At start the gate connects and loads its four scripts, before any
/// purchase. A first wave of purchases of a type Redis does not know yet
/// (not built ahead: off here, as for a hash lost before the rush)
/// rebuilds its hash from Postgres once: one rebuild script and one admit
/// script each, not a rebuild per purchase that waited for the first.
#[sqlx::test]
async fn the_gate_warms_up_at_start_and_a_first_wave_rebuilds_once(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    const WAVE: i64 = 40;
    let (pool, fixture) = setup(connect, TicketSpec::new(100, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let own = OwnRedis::start();
    own.until_up().await;
    let settings = GateSettings {
        prefix: PREFIX.into(),
        timeout: Duration::from_millis(500),
        reconcile_every: Duration::from_secs(3600),
        build_ahead: None,
        ..GateSettings::default()
    };
    let sales = gated_with(&pool, &own.url(), settings);
    let gate = sales.gate().unwrap();
    assert!(format!("{gate:?}").contains(PREFIX), "{gate:?}");
    let mut loaded = 0;
    for _ in 0..100 {
        loaded = own.calls(&["script|load"]).await;
        if loaded == 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(loaded, 4, "scripts loaded at start");
    // No rebuild for a missed notification during the wave.
    until_listening(&pool, 2).await;
    assert_eq!(own.scripts_run().await, 0);

    let wave: Vec<_> = (0..WAVE)
        .map(|i| {
            let sales = sales.clone();
            let req = request(tt, 1, &format!("wave{i}@example.org"), &fresh_key());
            tokio::spawn(async move { sales.purchase(now(), &req).await })
        })
        .collect();
    for buyer in wave {
        let bought = buyer.await.unwrap();
        assert!(matches!(bought, Ok(Purchase::Created { .. })), "{bought:?}");
    }
    assert_eq!(gate.admitted(), WAVE as u64);
    assert_eq!(
        own.scripts_run().await,
        WAVE + 1,
        "one rebuild, one admit each"
    );
    assert_eq!(sold(&pool, tt).await, WAVE);
    assert_invariants(&pool).await;
}

/// Fewer left than asked: Redis says how many (the buyer may ask for
/// fewer), rather than "sold out".
#[sqlx::test]
async fn the_gate_tells_how_many_are_left_when_fewer_than_asked(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = setup(connect, TicketSpec::new(3, 2, 2)).await;
    let tt = fixture.ticket_type_id();
    let sales = gated(&pool, &shared_redis(), Duration::from_secs(3600));
    // Once the listeners are up, no rebuild for a missed notification
    // races the first purchase (it would forget that admission, and Redis
    // would admit the second purchase for Postgres to refuse).
    until_listening(&pool, 2).await;
    sales
        .purchase(now(), &request(tt, 2, "first@example.org", &fresh_key()))
        .await
        .unwrap();
    let refused = sales
        .purchase(now(), &request(tt, 2, "second@example.org", &fresh_key()))
        .await;
    assert!(
        matches!(refused, Err(AppError::NotEnoughLeft { remaining: 1 })),
        "{refused:?}"
    );
    assert_eq!(sales.gate().unwrap().admitted(), 1);
    sales
        .purchase(now(), &request(tt, 1, "second@example.org", &fresh_key()))
        .await
        .unwrap();
    assert_eq!(sold(&pool, tt).await, 3);
    assert_invariants(&pool).await;
}

/// `/metrics` counts the rebuilds that wrote the hash: a process's first
/// purchases build it once, the others find it there.
#[sqlx::test]
async fn the_rebuilds_that_wrote_are_counted(_: PgPoolOptions, connect: PgConnectOptions) {
    let (pool, fixture) = setup(connect.clone(), TicketSpec::new(40, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let url = database_url(&connect);
    let redis = shared_redis();
    let prefix = format!("stampede:test:rebuilds:{}:", Uuid::new_v4());
    let args = [
        "--redis-gate",
        "--redis-url",
        &redis,
        "--redis-gate-prefix",
        &prefix,
        "--redis-gate-reconcile-secs",
        "3600",
        "--purchase-burst-per-ip",
        "0",
    ];
    let server = ServerProcess::start(&url, &args).await;
    // Both listeners (the sold-out flags' and the gate's) have resynced:
    // a resync after the first purchase would rebuild the hash once more.
    for _ in 0..500 {
        if counter(&server, "stampede_stock_listener_resyncs_total").await >= 2.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        counter(&server, "stampede_stock_listener_resyncs_total").await,
        2.0
    );
    let client = reqwest::Client::new();
    for i in 0..5 {
        let response = client
            .post(server.url("/api/v1/orders"))
            .json(&serde_json::json!({
                "ticket_type_id": tt,
                "quantity": 1,
                "email": format!("fan{i}@example.org"),
                "idempotency_key": fresh_key(),
            }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 201);
    }
    assert_eq!(counter(&server, "stampede_gate_rebuilds_total").await, 1.0);
    assert_eq!(sold(&pool, tt).await, 5);
    assert_invariants(&pool).await;
}

/// Stock comes back while Redis is held: the rebuild it wakes times out,
/// and the type stays marked stale. Once Redis answers, the next purchase
/// rebuilds the type first and is admitted by the gate, not sent around it
/// as a type Redis does not know.
#[sqlx::test]
async fn a_type_whose_rebuild_failed_is_rebuilt_by_its_next_purchase(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = setup(connect, TicketSpec::new(10, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let own = OwnRedis::start();
    own.until_up().await;
    let settings = GateSettings {
        prefix: PREFIX.into(),
        // A rebuild's budget: ten of these, at least a second.
        timeout: Duration::from_millis(100),
        reconcile_every: Duration::from_secs(3600),
        ..GateSettings::default()
    };
    let sales = gated_with(&pool, &own.url(), settings);
    let gate = sales.gate().unwrap();
    until_listening(&pool, 2).await;
    sales
        .purchase(now(), &request(tt, 1, "first@example.org", &fresh_key()))
        .await
        .unwrap();
    assert_eq!(gate.admitted(), 1);

    let resumes = pause_redis(&own, Duration::from_millis(2500)).await;
    sqlx::query(
        "UPDATE ticket_types SET capacity = capacity + 1, remaining = remaining + 1 WHERE id = $1",
    )
    .bind(tt)
    .execute(&pool)
    .await
    .unwrap();
    tokio::time::sleep_until(resumes + Duration::from_millis(200)).await;
    assert!(!gate.standing_aside(), "one timeout took the gate aside");

    sales
        .purchase(now(), &request(tt, 1, "second@example.org", &fresh_key()))
        .await
        .unwrap();
    assert_eq!(gate.admitted(), 2, "the purchase went around the gate");
    assert_eq!(sold(&pool, tt).await, 2);
    assert_invariants(&pool).await;
}

/// Redis lost the hash of a type this instance built (flushed, restarted,
/// expired): the purchase that finds it missing rebuilds it from Postgres
/// and is admitted by the gate, not sent around it.
#[sqlx::test]
async fn a_purchase_that_finds_the_hash_lost_rebuilds_it_and_is_admitted(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, tt, own, sales) = own_gate(
        connect,
        TicketSpec::new(10, 1, 1),
        Duration::from_secs(3600),
    )
    .await;
    let gate = sales.gate().unwrap();
    until_listening(&pool, 2).await;
    sales
        .purchase(now(), &request(tt, 1, "first@example.org", &fresh_key()))
        .await
        .unwrap();
    let _: i64 = own
        .cmd(redis::cmd("DEL").arg(format!("{PREFIX}{{tt:{tt}}}:stock")))
        .await
        .unwrap();
    sales
        .purchase(now(), &request(tt, 1, "second@example.org", &fresh_key()))
        .await
        .unwrap();
    assert_eq!(gate.admitted(), 2, "the purchase went around the gate");
    let mut conn = redis::Client::open(own.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    assert_eq!(stock_hash(&mut conn, tt).await["left"], "8");
    assert_eq!(sold(&pool, tt).await, 2);
    assert_invariants(&pool).await;
}

/// The window between the sold-out flag and the keys it learns: an instance
/// that Postgres has just told "sold out", whose read of the type's keys
/// waits (the orders table locked), asks the gate whether a refusal could
/// be a retry, and refuses one that cannot without reading Postgres.
#[sqlx::test]
async fn before_the_keys_are_known_the_gate_tells_which_refusals_need_no_read(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = setup(connect.clone(), TicketSpec::new(2, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let seller = gated(&pool, &shared_redis(), Duration::from_secs(3600));
    let other = gated(
        &common::pool(connect, 4).await,
        &shared_redis(),
        Duration::from_secs(3600),
    );
    // Both instances listening (gate and engine each): a listener that
    // connects late clears the sold-out flags and marks the types stale (a
    // missed notification), which must not happen during the lock below.
    until_listening(&pool, 4).await;
    other
        .purchase(now(), &request(tt, 1, "first@example.org", &fresh_key()))
        .await
        .unwrap();
    seller
        .purchase(now(), &request(tt, 1, "second@example.org", &fresh_key()))
        .await
        .unwrap();

    let blocker = lock_table(&pool, "orders").await;
    // Redis refuses; `other` asks Postgres (ticket_types only), sets its
    // flag, and its read of the keys waits on the lock.
    let refused = tokio::time::timeout(
        Duration::from_secs(5),
        other.purchase(now(), &request(tt, 1, "third@example.org", &fresh_key())),
    )
    .await;
    let Ok(refused) = refused else {
        blocker.rollback().await.unwrap();
        panic!("a refusal from Redis waited for Postgres");
    };
    assert!(matches!(refused, Err(AppError::SoldOut)), "{refused:?}");
    for _ in 0..250 {
        if other.known_sold_out(tt.into()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(other.known_sold_out(tt.into()), "the flag was never set");
    assert!(!other.refuses_without_reading(tt.into()));
    let refused = tokio::time::timeout(
        Duration::from_secs(5),
        other.purchase(now(), &request(tt, 1, "fourth@example.org", &fresh_key())),
    )
    .await;
    // Released before any assertion: a failing test then ends, rather than
    // leave a purchase waiting on the lock while the test database drops.
    blocker.rollback().await.unwrap();
    let refused = refused.expect("the refusal waited for Postgres");
    assert!(matches!(refused, Err(AppError::SoldOut)), "{refused:?}");
    assert_eq!(sold(&pool, tt).await, 2);
    assert_invariants(&pool).await;
}

/// Stock that comes back while the gate's listener is reconnecting sends a
/// notification nobody hears: on reconnecting, the gate rebuilds every type
/// it has seen, so the ticket is sold again long before the reconcile (an
/// hour here).
#[sqlx::test]
async fn stock_returned_while_the_listener_was_away_is_sold_again(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = setup(connect.clone(), TicketSpec::new(1, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let sales = gated(&pool, &shared_redis(), Duration::from_secs(3600));
    until_listening(&pool, 2).await;
    sales
        .purchase(now(), &request(tt, 1, "first@example.org", &fresh_key()))
        .await
        .unwrap();
    let refused = sales
        .purchase(now(), &request(tt, 1, "second@example.org", &fresh_key()))
        .await;
    assert!(matches!(refused, Err(AppError::SoldOut)), "{refused:?}");

    // The listeners cut off, and kept off (no new connection to the
    // database) while the ticket comes back: its notification is lost.
    let mut admin = pool.acquire().await.unwrap();
    let database: String = sqlx::query_scalar("SELECT quote_ident(current_database())")
        .fetch_one(&mut *admin)
        .await
        .unwrap();
    // ALTER DATABASE from another database (not allowed on the current one).
    let mut elsewhere = <sqlx::postgres::PgConnection as sqlx::Connection>::connect_with(
        &connect.database("postgres"),
    )
    .await
    .unwrap();
    let connections =
        |allowed: bool| format!("ALTER DATABASE {database} ALLOW_CONNECTIONS {allowed}");
    sqlx::query(&connections(false))
        .execute(&mut elsewhere)
        .await
        .unwrap();
    let cut: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND query LIKE 'LISTEN%'",
    )
    .fetch_all(&mut *admin)
    .await
    .unwrap();
    assert!(cut.len() >= 2, "{cut:?}");
    sqlx::query("UPDATE ticket_types SET capacity = 2, remaining = 1 WHERE id = $1")
        .bind(tt)
        .execute(&mut *admin)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    sqlx::query(&connections(true))
        .execute(&mut elsewhere)
        .await
        .unwrap();
    drop(admin);
    until_listening(&pool, 2).await;

    let mut answer = Err(AppError::Overloaded);
    for i in 0..30 {
        answer = sales
            .purchase(
                now(),
                &request(tt, 1, &format!("later{i}@example.org"), &fresh_key()),
            )
            .await;
        if answer.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        matches!(answer, Ok(Purchase::Created { .. })),
        "the returned ticket stayed unsold: {answer:?}"
    );
    assert_eq!(sold(&pool, tt).await, 2);
    assert_invariants(&pool).await;
}

/// The periodic reconcile goes on after an outage: Redis down, then back,
/// and then short of two admissions that were never written; the reconcile
/// (every 700 ms) puts both tickets back on sale.
#[sqlx::test]
async fn the_reconcile_goes_on_after_an_outage(_: PgPoolOptions, connect: PgConnectOptions) {
    let (pool, tt, mut own, sales) = own_gate(
        connect,
        TicketSpec::new(5, 1, 1),
        Duration::from_millis(700),
    )
    .await;
    let port = own.port;
    buy_until(&sales, &pool, tt, 1, 10, "before").await;
    own.stop();
    buy_until(&sales, &pool, tt, 2, 10, "down").await;
    assert!(sales.gate().unwrap().standing_aside());
    let own = OwnRedis::start_on(port);
    own.until_up().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    buy_until(&sales, &pool, tt, 3, 10, "back").await;
    // Back, the gate rebuilt what it had seen (at this purchase at last).
    buy_until(&sales, &pool, tt, 4, 10, "again").await;
    assert_eq!(sold(&pool, tt).await, 4);
    let admitted = sales.gate().unwrap().admitted();
    // Two admissions counted in Redis, never written: none left there.
    let _: i64 = own
        .cmd(
            redis::cmd("HSET")
                .arg(format!("{PREFIX}{{tt:{tt}}}:stock"))
                .arg("left")
                .arg(0),
        )
        .await
        .unwrap();
    buy_until(&sales, &pool, tt, 5, 150, "later").await;
    assert_eq!(sold(&pool, tt).await, 5, "the ticket stayed unsold");
    assert_eq!(sales.gate().unwrap().admitted(), admitted + 1);
    assert_invariants(&pool).await;
}

/// The periodic reconcile runs once per interval: over two seconds at
/// 400 ms, about five rebuilds of the one type seen (at least one, and
/// few however late a loaded machine runs them), not a loop.
#[sqlx::test]
async fn the_reconcile_runs_once_per_interval(_: PgPoolOptions, connect: PgConnectOptions) {
    let (pool, tt, own, sales) = own_gate(
        connect,
        TicketSpec::new(10, 1, 1),
        Duration::from_millis(400),
    )
    .await;
    until_listening(&pool, 2).await;
    sales
        .purchase(now(), &request(tt, 1, "first@example.org", &fresh_key()))
        .await
        .unwrap();
    let before = own.scripts_run().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rebuilds = own.scripts_run().await - before;
    assert!((1..=10).contains(&rebuilds), "{rebuilds} rebuilds in 2 s");
    assert_invariants(&pool).await;
}

/// While the gate stands aside (Redis down), the reconcile leaves Postgres
/// and Redis alone: over five of its intervals no rebuild reads the
/// holdings (locked here, so a read would wait, and show).
#[sqlx::test]
async fn while_the_gate_stands_aside_the_reconcile_rebuilds_nothing(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = setup(connect, TicketSpec::new(10, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let mut own = OwnRedis::start();
    own.until_up().await;
    let settings = GateSettings {
        prefix: PREFIX.into(),
        timeout: Duration::from_millis(500),
        reconcile_every: Duration::from_millis(300),
        retry_after: Duration::from_secs(30),
        ..GateSettings::default()
    };
    let sales = gated_with(&pool, &own.url(), settings);
    until_listening(&pool, 2).await;
    buy_until(&sales, &pool, tt, 1, 10, "before").await;
    own.stop();
    buy_until(&sales, &pool, tt, 2, 10, "down").await;
    assert!(sales.gate().unwrap().standing_aside());

    let holdings = lock_table(&pool, "buyer_holdings").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        blocked(&pool, "").await,
        Vec::<i32>::new(),
        "a rebuild while the gate stood aside"
    );
    holdings.rollback().await.unwrap();
    assert_eq!(sold(&pool, tt).await, 2);
    assert_invariants(&pool).await;
}

/// A ticket type's gate keys (its stock hash and in-flight set) deleted
/// from the shared Redis.
async fn forget_type(conn: &mut redis::aio::MultiplexedConnection, tt: Uuid) {
    let _: i64 = redis::cmd("DEL")
        .arg(format!("{PREFIX}{{tt:{tt}}}:stock"))
        .arg(format!("{PREFIX}{{tt:{tt}}}:inflight"))
        .query_async(conn)
        .await
        .unwrap();
}

/// Now, as the gate scores admissions in flight.
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The engine, one transaction per purchase (each waits in Postgres
/// visibly), behind the shared Redis with a reconcile every `reconcile_every`.
fn naive_gated(pool: &PgPool, reconcile_every: Duration, settle_within: Duration) -> Sales {
    let settings = GateSettings {
        prefix: PREFIX.into(),
        timeout: Duration::from_secs(1),
        reconcile_every,
        settle_within,
        ..GateSettings::default()
    };
    Sales::new(pool.clone(), Strategy::Naive, EngineSettings::default())
        .with_gate(GateRedis::Server(shared_redis()), settings)
        .unwrap()
}

/// Stock returned (announced) while three purchases, admitted for the last
/// three tickets, wait on the ticket type's row. A rebuild then would read
/// their tickets as still for sale and Redis would admit as many again:
/// the rebuild waits. A fourth buyer is refused from Redis (not queued on
/// the row), and once the three commit, the rebuild held back runs by
/// itself (the periodic reconcile is an hour away) and agrees with Postgres.
#[sqlx::test]
async fn a_rebuild_waits_for_the_purchases_in_flight(_: PgPoolOptions, connect: PgConnectOptions) {
    let (pool, fixture) = setup(connect, TicketSpec::new(4, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let sales = naive_gated(&pool, Duration::from_secs(3600), Duration::from_secs(30));
    until_listening(&pool, 2).await;
    sales
        .purchase(now(), &request(tt, 1, "first@example.org", &fresh_key()))
        .await
        .unwrap();
    let client = redis::Client::open(shared_redis()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let built = stock_hash(&mut conn, tt).await;

    let hold = hold_ticket_type(&pool, tt).await;
    let waiting: Vec<_> = (0..3)
        .map(|i| {
            let sales = sales.clone();
            let req = request(tt, 1, &format!("waiting{i}@example.org"), &fresh_key());
            tokio::spawn(async move { sales.purchase(now(), &req).await })
        })
        .collect();
    wait_until_blocked(&pool, "UPDATE ticket_types", 3).await;
    // As a cancellation would announce it (the row is held: none can run).
    sqlx::query("SELECT pg_notify('stampede_stock_returned', $1)")
        .bind(tt.to_string())
        .execute(&pool)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let fourth = tokio::time::timeout(
        Duration::from_secs(5),
        sales.purchase(now(), &request(tt, 1, "fourth@example.org", &fresh_key())),
    )
    .await;
    let during = stock_hash(&mut conn, tt).await;
    // Released before any assertion (a failing test ends, not hangs).
    hold.tx.rollback().await.unwrap();
    let fourth = fourth.expect("the fourth buyer waited on the row: Redis admitted them");
    assert!(matches!(fourth, Err(AppError::SoldOut)), "{fourth:?}");
    assert_eq!(
        during["gen"], built["gen"],
        "rebuilt under purchases in flight"
    );
    for task in waiting {
        let bought = task.await.unwrap();
        assert!(matches!(bought, Ok(Purchase::Created { .. })), "{bought:?}");
    }
    assert_eq!(sales.gate().unwrap().admitted(), 4);

    let mut after = stock_hash(&mut conn, tt).await;
    for _ in 0..100 {
        if after["gen"] != built["gen"] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        after = stock_hash(&mut conn, tt).await;
    }
    assert_ne!(
        after["gen"], built["gen"],
        "the rebuild held back never ran"
    );
    assert_eq!(after["left"], "0", "{after:?}");
    assert_eq!(sold(&pool, tt).await, 4);
    assert_invariants(&pool).await;
    forget_type(&mut conn, tt).await;
}

/// An admission that Redis counted but that will never be settled (its
/// instance killed before the commit, simulated by counting it by hand)
/// holds the reconcile back for `settle_within`, and only that long: then
/// its ticket is on sale again.
#[sqlx::test]
async fn a_lost_admission_holds_the_reconcile_back_only_for_a_while(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = setup(connect, TicketSpec::new(2, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let settle_within = Duration::from_secs(2);
    let sales = naive_gated(&pool, Duration::from_millis(200), settle_within);
    until_listening(&pool, 2).await;
    sales
        .purchase(now(), &request(tt, 1, "first@example.org", &fresh_key()))
        .await
        .unwrap();
    let client = redis::Client::open(shared_redis()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let admitted_ms = unix_ms();
    let lost_at = std::time::Instant::now();
    let _: () = redis::pipe()
        .hincr(format!("{PREFIX}{{tt:{tt}}}:stock"), "left", -1)
        .ignore()
        .zadd(
            format!("{PREFIX}{{tt:{tt}}}:inflight"),
            format!("{PREFIX}{{tt:{tt}}}:key:lost"),
            admitted_ms,
        )
        .ignore()
        .query_async(&mut conn)
        .await
        .unwrap();

    let mut sold_after = None;
    for i in 0..150 {
        let answer = sales
            .purchase(
                now(),
                &request(tt, 1, &format!("later{i}@example.org"), &fresh_key()),
            )
            .await;
        match answer {
            Ok(Purchase::Created { .. }) => {
                sold_after = Some(lost_at.elapsed());
                break;
            }
            Err(AppError::SoldOut) => {}
            other => panic!("{other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let sold_after = sold_after.expect("the lost admission's ticket stayed unsold");
    // Scores are whole milliseconds: a little slack for the rounding.
    assert!(
        sold_after + Duration::from_millis(20) >= settle_within,
        "rebuilt after {sold_after:?}, under an admission in flight"
    );
    assert_eq!(sold(&pool, tt).await, 2);
    assert_invariants(&pool).await;
    forget_type(&mut conn, tt).await;
}

/// While a purchase is in flight (an admission counted by hand, as in
/// Redis), the rebuild of returned stock waits: it reads nothing from
/// Postgres (the holdings are locked, so a read would wait, and show), and
/// purchases meanwhile, at once or one after another, retry it at most
/// once per 100 ms between them and the reconciler (counted in ZCOUNTs,
/// the wait's own read), not once each.
#[sqlx::test]
async fn a_rebuild_that_waits_costs_postgres_nothing_and_is_retried_sparingly(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, tt, own, sales) = own_gate(
        connect,
        TicketSpec::new(100, 1, 1),
        Duration::from_secs(3600),
    )
    .await;
    until_listening(&pool, 2).await;
    sales
        .purchase(now(), &request(tt, 1, "first@example.org", &fresh_key()))
        .await
        .unwrap();
    let admitted_ms = unix_ms();
    let _: i64 = own
        .cmd(
            redis::cmd("ZADD")
                .arg(format!("{PREFIX}{{tt:{tt}}}:inflight"))
                .arg(admitted_ms)
                .arg(format!("{PREFIX}{{tt:{tt}}}:key:in-flight")),
        )
        .await
        .unwrap();

    let holdings = lock_table(&pool, "buyer_holdings").await;
    sqlx::query("SELECT pg_notify('stampede_stock_returned', $1)")
        .bind(tt.to_string())
        .execute(&pool)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let readers = blocked(&pool, "").await;
    holdings.rollback().await.unwrap();
    assert_eq!(readers, Vec::<i32>::new(), "a rebuild read Postgres");

    let before = own.calls(&["zcount"]).await;
    let started = std::time::Instant::now();
    // Two waves of 20 at once, then 20 one after another.
    for wave in 0..3 {
        let requests: Vec<_> = (0..20)
            .map(|i| request(tt, 1, &format!("run{wave}-{i}@example.org"), &fresh_key()))
            .collect();
        if wave < 2 {
            let answers =
                futures::future::join_all(requests.iter().map(|req| sales.purchase(now(), req)))
                    .await;
            for bought in answers {
                assert!(matches!(bought, Ok(Purchase::Created { .. })), "{bought:?}");
            }
        } else {
            for req in &requests {
                let bought = sales.purchase(now(), req).await;
                assert!(matches!(bought, Ok(Purchase::Created { .. })), "{bought:?}");
            }
        }
    }
    let windows = started.elapsed().as_millis() as i64 / 100 + 1;
    let tries = own.calls(&["zcount"]).await - before;
    assert!(
        tries <= 2 * windows + 1,
        "{tries} tries in {windows} windows of 100 ms"
    );
    assert_eq!(sales.gate().unwrap().admitted(), 61);
    assert_eq!(sold(&pool, tt).await, 61);
    assert_invariants(&pool).await;
}

/// The race the rebuild's script closes: a rebuild found nothing in flight
/// and took its snapshot (held here on the locked holdings), and a purchase
/// was admitted before it wrote. Its snapshot may miss that purchase, so
/// the script must not write; the rebuild is retried once the purchase has
/// settled. Redis was lowered by two lost admissions first, so only a
/// rebuild that did write, from a snapshot after the purchase, brings
/// Redis back to what Postgres has.
#[sqlx::test]
async fn an_admission_during_the_snapshot_makes_the_rebuild_wait(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = setup(connect, TicketSpec::new(10, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let sales = naive_gated(&pool, Duration::from_secs(3600), Duration::from_secs(30));
    until_listening(&pool, 2).await;
    sales
        .purchase(now(), &request(tt, 1, "first@example.org", &fresh_key()))
        .await
        .unwrap();
    let client = redis::Client::open(shared_redis()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let stock = format!("{PREFIX}{{tt:{tt}}}:stock");
    // Settled: the first purchase's ZREM runs off its answer.
    for _ in 0..100 {
        let in_flight: i64 = redis::cmd("ZCARD")
            .arg(format!("{PREFIX}{{tt:{tt}}}:inflight"))
            .query_async(&mut conn)
            .await
            .unwrap();
        if in_flight == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _: i64 = redis::cmd("HINCRBY")
        .arg(&stock)
        .arg("left")
        .arg(-2)
        .query_async(&mut conn)
        .await
        .unwrap();

    let holdings = lock_table(&pool, "buyer_holdings").await;
    sqlx::query("SELECT pg_notify('stampede_stock_returned', $1)")
        .bind(tt.to_string())
        .execute(&pool)
        .await
        .unwrap();
    // The rebuild's snapshot waits on the lock...
    let snapshot = tokio::time::timeout(
        Duration::from_secs(10),
        wait_until_blocked(&pool, "SELECT t.remaining", 1),
    )
    .await;
    // ...and a purchase is admitted meanwhile (its insert waits too). A
    // purchase that finds the type marked tries the rebuild itself first
    // and waits for the one under way; after it, for 100 ms, the others
    // go straight to the gate: buyers come until one is admitted.
    let mut buyers = Vec::new();
    let admitted = tokio::time::timeout(Duration::from_secs(10), async {
        while sales.gate().unwrap().admitted() < 2 {
            let sales = sales.clone();
            let email = format!("during{}@example.org", buyers.len());
            let req = request(tt, 1, &email, &fresh_key());
            buyers.push(tokio::spawn(
                async move { sales.purchase(now(), &req).await },
            ));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    holdings.rollback().await.unwrap();
    snapshot.expect("no rebuild read the holdings");
    admitted.expect("no purchase during the snapshot was admitted");
    let during = buyers.len() as i64;
    for buyer in buyers {
        let bought = buyer.await.unwrap();
        assert!(matches!(bought, Ok(Purchase::Created { .. })), "{bought:?}");
    }

    let remaining = common::remaining(&pool, tt).await;
    assert_eq!(i64::from(remaining), 9 - during);
    let mut left = String::new();
    for _ in 0..100 {
        left = stock_hash(&mut conn, tt).await["left"].clone();
        if left == remaining.to_string() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        left,
        remaining.to_string(),
        "the rebuild that wrote nothing was never retried"
    );
    assert_eq!(sold(&pool, tt).await, 1 + during);
    assert_invariants(&pool).await;
    forget_type(&mut conn, tt).await;
}

/// Redis says "sold out" as soon as the last ticket is admitted, before
/// Postgres has decided that purchase. A refusal meanwhile waits for it: if
/// Postgres refuses it (here the event-wide limit per buyer, which only
/// Postgres knows) and its ticket is given back, the waiting buyer asks
/// again and gets it, rather than "sold out" for a ticket still on sale.
#[sqlx::test]
async fn a_sold_out_answer_waits_for_the_admitted_purchase_and_gets_its_ticket_back(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 16).await;
    let specs = [TicketSpec::new(5, 1, 1), TicketSpec::new(1, 1, 1)];
    let fixture = published_event(&pool, &specs).await;
    let (first, last) = (fixture.ticket_type_ids[0], fixture.ticket_type_ids[1]);
    sqlx::query("UPDATE events SET max_per_buyer = 1 WHERE id = $1")
        .bind(fixture.event_id)
        .execute(&pool)
        .await
        .unwrap();
    let own = OwnRedis::start();
    own.until_up().await;
    let sales = gated(&pool, &own.url(), Duration::from_secs(3600));
    until_listening(&pool, 2).await;
    let gate = sales.gate().unwrap();
    // Ada reaches the event's limit with the first type.
    sales
        .purchase(now(), &request(first, 1, "ada@example.org", &fresh_key()))
        .await
        .unwrap();

    // Her purchase of the last ticket is admitted (Redis knows only the
    // type's limit), then waits on the row.
    let hold = hold_ticket_type(&pool, last).await;
    let ada = {
        let sales = sales.clone();
        let req = request(last, 1, "ada@example.org", &fresh_key());
        tokio::spawn(async move { sales.purchase(now(), &req).await })
    };
    for _ in 0..200 {
        if gate.admitted() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let admitted = gate.admitted();
    let bob = {
        let sales = sales.clone();
        let req = request(last, 1, "bob@example.org", &fresh_key());
        tokio::spawn(async move { sales.purchase(now(), &req).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let bob_waited = !bob.is_finished();
    // Released before any assertion (a failing test ends, not hangs).
    hold.tx.rollback().await.unwrap();
    assert_eq!(admitted, 2, "Ada's second purchase was admitted");
    assert!(
        bob_waited,
        "Bob was told sold out while Ada's purchase was undecided"
    );

    let ada = ada.await.unwrap();
    assert!(
        matches!(ada, Err(AppError::EventBuyerLimit { max: 1 })),
        "{ada:?}"
    );
    let bob = bob.await.unwrap();
    assert!(matches!(bob, Ok(Purchase::Created { .. })), "{bob:?}");
    assert_eq!(gate.admitted(), 3);
    assert_eq!(sold(&pool, last).await, 1);
    assert_invariants(&pool).await;
}
