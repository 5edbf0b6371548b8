//! What only the engine has: batches that fail a bad request alone, its
//! bounded queue, a batch refusing an event unpublished under it, deadlines.

use super::*;

/// A batch with bad requests in it (over the order limit, over the buyer
/// limit, a key used before for something else): they fail alone, every
/// other request commits, and the good ones shared one transaction.
#[sqlx::test]
async fn a_bad_request_fails_alone_in_its_batch(_: PgPoolOptions, connect: PgConnectOptions) {
    let (pool, fixture) = rush(connect, TicketSpec::new(100, 2, 2)).await;
    let tt = fixture.ticket_type_id();
    let sales = Sales::new(pool.clone(), Strategy::Batch, EngineSettings::default());
    let used_key = fresh_key();
    sales
        .purchase(now(), &request(tt, 1, "eve@example.org", &used_key))
        .await
        .unwrap();

    // The first purchase's batch waits for the row; the rest gather behind it.
    let held = hold_row(&pool, tt).await;
    let first = {
        let sales = sales.clone();
        let request = request(tt, 1, "first@example.org", &fresh_key());
        tokio::spawn(async move { sales.purchase(now(), &request).await })
    };
    until_waiting_for_locks(&pool, 1).await;
    let mut requests: Vec<_> = (0..20)
        .map(|i| request(tt, 1, &format!("good{i}@example.org"), &fresh_key()))
        .collect();
    requests.insert(3, request(tt, 3, "greedy@example.org", &fresh_key()));
    requests.insert(7, request(tt, 2, "eve@example.org", &fresh_key()));
    requests.insert(9, request(tt, 2, "eve@example.org", &used_key));
    let tasks: Vec<_> = requests
        .into_iter()
        .map(|request| {
            let sales = sales.clone();
            tokio::spawn(async move {
                let result = sales.purchase(now(), &request).await;
                (request, result)
            })
        })
        .collect();
    // Let them all reach the queue, then release the row.
    tokio::time::sleep(Duration::from_millis(300)).await;
    held.rollback().await.unwrap();
    first.await.unwrap().unwrap();
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap());
    }

    assert_invariants(&pool).await;
    for (request, result) in &results {
        match request.email.as_str() {
            "greedy@example.org" => {
                assert!(
                    matches!(result, Err(AppError::OrderLimit { max: 2 })),
                    "{result:?}"
                )
            }
            "eve@example.org" if request.idempotency_key.as_str() == used_key => {
                assert!(
                    matches!(result, Err(AppError::IdempotencyConflict)),
                    "{result:?}"
                )
            }
            "eve@example.org" => {
                assert!(
                    matches!(result, Err(AppError::BuyerLimit { max: 2 })),
                    "{result:?}"
                )
            }
            _ => assert!(matches!(result, Ok(Purchase::Created { .. })), "{result:?}"),
        }
    }
    // 1 (eve) + 1 (first) + 20 (good).
    assert_eq!(sold(&pool, tt).await, 22);
    // The twenty good orders were written by at most two transactions
    // (one batch, or two if the queue was read while they arrived).
    let transactions: i64 = sqlx::query_scalar(
        "SELECT count(DISTINCT xmin::text) FROM orders WHERE email LIKE 'good%'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(
        transactions <= 2,
        "20 purchases took {transactions} transactions"
    );
}

/// A full queue answers 503 at once and writes nothing for that request.
#[sqlx::test]
async fn a_full_queue_refuses_at_once_and_writes_nothing(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = rush(connect, TicketSpec::new(100, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let settings = EngineSettings {
        max_batch: 1,
        queue_capacity: 1,
        ..EngineSettings::default()
    };
    let sales = Sales::new(pool.clone(), Strategy::Batch, settings);
    let held = hold_row(&pool, tt).await;
    let spawn = |email: &'static str| {
        let sales = sales.clone();
        let request = request(tt, 1, email, &fresh_key());
        tokio::spawn(async move { sales.purchase(now(), &request).await })
    };
    // One in the worker's batch (waiting for the row), one in the queue.
    let in_batch = spawn("a@example.org");
    until_waiting_for_locks(&pool, 1).await;
    let queued = spawn("b@example.org");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let refused = sales
        .purchase(now(), &request(tt, 1, "c@example.org", &fresh_key()))
        .await;
    assert!(matches!(refused, Err(AppError::Overloaded)), "{refused:?}");
    held.rollback().await.unwrap();
    in_batch.await.unwrap().unwrap();
    queued.await.unwrap().unwrap();
    assert_invariants(&pool).await;
    let refused_orders: i64 =
        sqlx::query_scalar("SELECT count(*) FROM orders WHERE email = 'c@example.org'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(refused_orders, 0);
    assert_eq!(sold(&pool, tt).await, 2);
}

/// The event unpublished while a batch waits for the row: the batch reads
/// the event after taking the lock and refuses, writing nothing.
#[sqlx::test]
async fn a_batch_waiting_for_the_row_sees_the_event_unpublished(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = rush(connect, TicketSpec::new(100, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let sales = Sales::new(pool.clone(), Strategy::Batch, EngineSettings::default());
    let held = hold_row(&pool, tt).await;
    let waiting = {
        let sales = sales.clone();
        let request = request(tt, 1, "a@example.org", &fresh_key());
        tokio::spawn(async move { sales.purchase(now(), &request).await })
    };
    until_waiting_for_locks(&pool, 1).await;
    // In the holding transaction: its trigger copies the status onto the
    // held row, which no other transaction could update meanwhile.
    let mut held = held;
    sqlx::query("UPDATE events SET status = 'draft' WHERE id = $1")
        .bind(fixture.event_id)
        .execute(&mut *held)
        .await
        .unwrap();
    held.commit().await.unwrap();
    let result = waiting.await.unwrap();
    assert!(matches!(result, Err(AppError::NotFound)), "{result:?}");
    assert_eq!(order_count(&pool).await, 0);
    assert_eq!(remaining(&pool, tt).await, 100);
    assert_invariants(&pool).await;
}

/// Postgres slow: the row held elsewhere past the purchase's deadline. The
/// buyer gets 503 (Overloaded) and the purchase is never written, not even
/// once the row is free; the next purchase goes through.
#[sqlx::test]
async fn a_purchase_past_its_deadline_is_refused_and_never_written(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = rush(connect, TicketSpec::new(100, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let settings = EngineSettings {
        deadline: Duration::from_millis(500),
        ..EngineSettings::default()
    };
    let sales = Sales::new(pool.clone(), Strategy::Batch, settings);
    let held = hold_row(&pool, tt).await;
    let late = sales
        .purchase(now(), &request(tt, 1, "late@example.org", &fresh_key()))
        .await;
    assert!(matches!(late, Err(AppError::Overloaded)), "{late:?}");
    held.rollback().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(order_count(&pool).await, 0);
    assert_eq!(remaining(&pool, tt).await, 100);

    sales
        .purchase(now(), &request(tt, 1, "next@example.org", &fresh_key()))
        .await
        .unwrap();
    assert_eq!(sold(&pool, tt).await, 1);
    assert_invariants(&pool).await;
}
