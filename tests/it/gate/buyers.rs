//! Buyers against the gate: one hammering with one key and with fresh
//! keys, limits raised mid-sale, retries, fewer left than asked.

use super::*;

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
