//! The periodic reconcile, and rebuilds while purchases are in flight.

use super::*;

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
