//! After the sell-out: refusals that spare Redis and Postgres, and the
//! sold-out flag set only once Postgres agrees.

use super::*;

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
