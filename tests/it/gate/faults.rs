//! Faults: the app killed between the gate and the commit, Redis flushed,
//! stopped, started again and slow mid-sale. Never an oversell, and every
//! ticket sells in the end.

use super::*;

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
