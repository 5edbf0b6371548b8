//! What a consumer receives: exactly the committed changes.

use super::*;

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
