//! Many buyers for few tickets, and cancels during the rush: never an oversell, every ticket returned once.

use super::*;

/// Seed 000: 200 buyers at once on 10 tickets, each asking for 1–4.
#[sqlx::test]
async fn two_hundred_buyers_racing_for_ten_tickets_never_oversell(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = rush(connect, TicketSpec::new(10, 4, 4)).await;
    let tt = fixture.ticket_type_id();
    // Replay a failure with STAMPEDE_TEST_SEED set to the seed it printed.
    let seed = std::env::var("STAMPEDE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    eprintln!("seed000 quantities: STAMPEDE_TEST_SEED={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let requests: Vec<_> = (0..200)
        .map(|i| {
            request(
                tt,
                rng.random_range(1..=4),
                &format!("buyer{i}@example.org"),
                &fresh_key(),
            )
        })
        .collect();

    let results = race(&pool, requests).await;

    let sold_total = sold(&pool, tt).await;
    assert_invariants(&pool).await;
    assert!(sold_total <= 10, "sold {sold_total} of 10");
    let remaining = 10 - sold_total;
    let mut answered = BTreeSet::new();
    let mut answered_quantity = 0;
    for (request, result) in &results {
        match result {
            Ok(Purchase::Created { order, .. }) => {
                assert!(
                    answered.insert(order.id.get()),
                    "two answers name one order"
                );
                assert_eq!(order.quantity, request.quantity.get());
                answered_quantity += i64::from(order.quantity);
            }
            Ok(Purchase::Replayed(_)) => panic!("no key was reused, nothing may replay"),
            // Refused: it asked for more than is left now (stock only shrinks).
            Err(AppError::SoldOut | AppError::NotEnoughLeft { .. }) => {
                assert!(
                    i64::from(request.quantity.get()) > remaining,
                    "refused {} although {remaining} are still left",
                    request.quantity.get()
                );
            }
            Err(other) => panic!("unexpected error: {other:?}"),
        }
    }
    assert_eq!(
        answered,
        confirmed_order_ids(&pool).await,
        "every success is exactly one committed order"
    );
    assert_eq!(answered_quantity, sold_total);
    pool.close().await;
}

#[sqlx::test]
async fn cancelling_and_buying_again_concurrently_keeps_counts_consistent(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = rush(connect, TicketSpec::new(100, 1, 1)).await;
    let tt = fixture.ticket_type_id();

    // 60 buyers already hold a ticket.
    let mut held = Vec::new();
    for i in 0..60 {
        let email = format!("early{i}@example.org");
        let purchase = buy_now(&pool, tt, 1, &email).await.unwrap();
        let secret = purchase.cancel_secret().unwrap().clone();
        held.push((email, purchase.order().id, secret));
    }

    // At once: 150 newcomers buy; each early buyer cancels (twice, as a
    // double click would) and then buys again.
    let barrier = Arc::new(Barrier::new(150 + 60));
    let mut tasks = Vec::new();
    for i in 0..150 {
        let (pool, barrier) = (pool.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let email = format!("late{i}@example.org");
            let outcome = buy_now(&pool, tt, 1, &email).await;
            match outcome {
                // NotEnoughLeft is the deliberate race: this purchase lost
                // the last ticket, and a cancel returned one before the
                // refusal was worded from a fresh read.
                Ok(Purchase::Created { .. })
                | Err(AppError::SoldOut | AppError::NotEnoughLeft { .. }) => {}
                other => panic!("newcomer: unexpected {other:?}"),
            }
        }));
    }
    for (email, order_id, secret) in held {
        let (pool, barrier) = (pool.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let (first, second) = tokio::join!(
                sale::cancel(&pool, now(), order_id, Some(&secret)),
                sale::cancel(&pool, now(), order_id, Some(&secret))
            );
            let dropped = [&first, &second].iter().filter(|r| r.is_ok()).count();
            let refused = [&first, &second]
                .iter()
                .filter(|r| matches!(r, Err(AppError::AlreadyCancelled)))
                .count();
            assert_eq!(
                (dropped, refused),
                (1, 1),
                "a cancel happens exactly once: {first:?} {second:?}"
            );
            match buy_now(&pool, tt, 1, &email).await {
                Ok(Purchase::Created { .. })
                | Err(AppError::SoldOut | AppError::NotEnoughLeft { .. }) => {}
                other => panic!("buying again: unexpected {other:?}"),
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }

    assert_invariants(&pool).await;
    let cancelled: i64 =
        sqlx::query_scalar("SELECT count(*) FROM orders WHERE status = 'cancelled'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(cancelled, 60, "each cancel cancelled exactly one order");
    // 210 buyers wanted one of 100 tickets and tickets came back: all are sold.
    assert_eq!(sold(&pool, tt).await, 100);
    pool.close().await;
}

#[sqlx::test]
async fn a_cancelled_order_returns_its_tickets_exactly_once(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(5, 5, 5)]).await;
    let tt = fixture.ticket_type_id();
    let purchase = buy_now(&pool, tt, 5, "ada@example.org").await.unwrap();
    let (order, secret) = (
        purchase.order().clone(),
        purchase.cancel_secret().unwrap().clone(),
    );
    let sold_out = buy_now(&pool, tt, 1, "bob@example.org").await;
    assert!(matches!(sold_out, Err(AppError::SoldOut)), "{sold_out:?}");

    // Without its secret, or with another's, an order stays.
    for wrong in [None, Some(CancelSecret::generate())] {
        assert!(matches!(
            sale::cancel(&pool, now(), order.id, wrong.as_ref()).await,
            Err(AppError::Forbidden(_))
        ));
    }
    assert_eq!(remaining(&pool, tt).await, 0);
    let cancelled = sale::cancel(&pool, now(), order.id, Some(&secret))
        .await
        .unwrap();
    assert_eq!(cancelled.status, OrderStatus::Cancelled);
    assert!(matches!(
        sale::cancel(&pool, now(), order.id, Some(&secret)).await,
        Err(AppError::AlreadyCancelled)
    ));
    assert!(matches!(
        sale::cancel(&pool, now(), Uuid::new_v4().into(), Some(&secret)).await,
        Err(AppError::NotFound)
    ));
    assert_eq!(remaining(&pool, tt).await, 5);
    assert_invariants(&pool).await;

    // The buyer's limit is freed too: they can buy again.
    let again = buy_now(&pool, tt, 5, "ada@example.org").await;
    assert!(matches!(again, Ok(Purchase::Created { .. })), "{again:?}");
    assert_invariants(&pool).await;
}
