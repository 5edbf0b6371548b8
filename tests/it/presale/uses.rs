//! A code's uses, enforced like stock and given back once.

use super::*;

async fn ten_uses_against_two_hundred_buyers(pool: &PgPool, strategy: Strategy) {
    let fixture = published_event(
        pool,
        &[TicketSpec::new(100, 1, 1), TicketSpec::new(100, 1, 1)],
    )
    .await;
    let (tt, open_type) = (fixture.ticket_type_ids[0], fixture.ticket_type_ids[1]);
    hidden_with_code(pool, &fixture, tt, "FANS-10", 10).await;
    let sales = Sales::new(pool.clone(), strategy, EngineSettings::default());
    let at = now();

    // Without the code the hidden type is not there; a code that does not
    // unlock a type is refused, naming the field.
    let bare = sales
        .purchase(at, &purchase_request(tt, 1, "nocode@example.org"))
        .await;
    assert!(matches!(bare, Err(AppError::NotFound)), "{bare:?}");
    let wrong = sales
        .purchase(
            at,
            &with_code(
                purchase_request(open_type, 1, "wrong@example.org"),
                "FANS-10",
            ),
        )
        .await;
    assert!(
        matches!(wrong, Err(AppError::Invalid(ref f)) if f.field == "presale_code"),
        "{wrong:?}"
    );
    let unknown = sales
        .purchase(
            at,
            &with_code(purchase_request(tt, 1, "unknown@example.org"), "NOPE-1"),
        )
        .await;
    assert!(matches!(unknown, Err(AppError::Invalid(_))), "{unknown:?}");

    let results = join_all((0..200).map(|i| {
        let sales = sales.clone();
        let request = with_code(
            purchase_request(tt, 1, &format!("fan{i}@example.org")),
            "fans-10",
        );
        async move { sales.purchase(at, &request).await }
    }))
    .await;
    let mut sold = Vec::new();
    for result in results {
        match result {
            Ok(Purchase::Created {
                order,
                cancel_secret,
            }) => sold.push((order, cancel_secret)),
            // Used up: the same answer as an unknown code.
            Err(AppError::Invalid(invalid)) if invalid.field == "presale_code" => {}
            other => panic!("unexpected answer: {other:?}"),
        }
    }
    assert_eq!(sold.len(), 10, "exactly the code's uses are sold");
    assert_eq!(used(pool, "FANS-10").await, 10);
    assert_eq!(sold_with(pool, "FANS-10").await, 10);
    assert_invariants(pool).await;

    // A cancel gives its use back, once; the next fan buys with it.
    let (order, secret) = &sold[0];
    sale::cancel(pool, now(), order.id, Some(secret))
        .await
        .unwrap();
    let again = sale::cancel(pool, now(), order.id, Some(secret)).await;
    assert!(
        matches!(again, Err(AppError::AlreadyCancelled)),
        "{again:?}"
    );
    assert_eq!(used(pool, "FANS-10").await, 9);
    let late = sales
        .purchase(
            now(),
            &with_code(purchase_request(tt, 1, "late@example.org"), "FANS-10"),
        )
        .await;
    assert!(matches!(late, Ok(Purchase::Created { .. })), "{late:?}");
    assert_eq!(used(pool, "FANS-10").await, 10);
    let over = sales
        .purchase(
            now(),
            &with_code(purchase_request(tt, 1, "over@example.org"), "FANS-10"),
        )
        .await;
    assert_eq!(
        over.err().map(|e| e.to_string()),
        Some(AppError::code_not_valid().to_string()),
        "a used-up code answers as an unknown one"
    );
    assert_eq!(sold_with(pool, "FANS-10").await, 10);
    assert_invariants(pool).await;
}

#[sqlx::test]
async fn a_code_with_ten_uses_sells_exactly_ten_tickets_to_two_hundred_buyers_in_the_engine(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 20).await;
    ten_uses_against_two_hundred_buyers(&pool, Strategy::Batch).await;
}

#[sqlx::test]
async fn a_code_with_ten_uses_sells_exactly_ten_tickets_to_two_hundred_buyers_one_by_one(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 20).await;
    ten_uses_against_two_hundred_buyers(&pool, Strategy::ForUpdate).await;
}

#[sqlx::test]
async fn a_held_order_that_expires_gives_its_code_uses_back(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 10).await;
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let tt = fixture.ticket_type_id();
    hidden_with_code(&pool, &fixture, tt, "HELD-2", 2).await;
    sqlx::query("UPDATE events SET hold_seconds = 60 WHERE id = $1")
        .bind(fixture.event_id)
        .execute(&pool)
        .await
        .unwrap();
    let sales = Sales::new(pool.clone(), Strategy::Batch, EngineSettings::default())
        .with_confirm_key(ConfirmKey::random());
    let at = now();
    let held = sales
        .purchase(
            at,
            &with_code(purchase_request(tt, 2, "held@example.org"), "HELD-2"),
        )
        .await
        .unwrap();
    assert_eq!(used(&pool, "HELD-2").await, 2);
    assert_eq!(
        sale::expire_holds(&pool, at + Span::seconds(61))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        sale::expire_holds(&pool, at + Span::seconds(62))
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        used(&pool, "HELD-2").await,
        0,
        "the expired hold's uses came back once"
    );
    assert_eq!(held.order().status.as_str(), "held");
    assert_invariants(&pool).await;
}
