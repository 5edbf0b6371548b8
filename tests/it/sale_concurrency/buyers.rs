//! One buyer racing themself: spellings of one mailbox, the event and buyer limits, one idempotency key many times.

use super::*;

/// Issue 7, item 4: spellings that reach one mailbox (or look like it) are
/// one buyer for the limit, however they race; each order keeps its email
/// as typed.
#[sqlx::test]
async fn spellings_of_one_mailbox_racing_share_one_buyer_limit(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = rush(connect, TicketSpec::new(100, 1, 3)).await;
    let tt = fixture.ticket_type_id();
    let spellings = [
        "jane.doe@gmail.com",
        "janedoe@gmail.com",
        "j.a.n.e.doe+resale@gmail.com",
        "JaneDoe+1@googlemail.com",
        "ｊａｎｅｄｏｅ@gmail.com",
        // Cyrillic а and е, and a combining-free fullwidth dot.
        "j\u{430}n\u{435}doe@gmail.com",
        "jane\u{FF0E}doe@gmail.com",
        "janedoe@gmail.com",
    ];
    let requests: Vec<_> = (0..48)
        .map(|i| request(tt, 1, spellings[i % spellings.len()], &fresh_key()))
        .collect();

    let results = race(&pool, requests).await;

    assert_invariants(&pool).await;
    assert_eq!(sold(&pool, tt).await, 3, "one buyer key, limit 3");
    for (_, result) in &results {
        match result {
            Ok(Purchase::Created { .. }) | Err(AppError::BuyerLimit { max: 3 }) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    let keys: Vec<String> = sqlx::query_scalar("SELECT DISTINCT buyer_key FROM orders")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(keys, ["janedoe@gmail.com"]);
    // Different mailboxes are still different buyers.
    assert!(buy_now(&pool, tt, 1, "jane.doe@example.org").await.is_ok());
    assert!(buy_now(&pool, tt, 1, "janedoe@example.org").await.is_ok());
    pool.close().await;
}

/// Issue 7, item 4: an event's limit per buyer holds across its ticket
/// types under concurrency, on the folded key.
#[sqlx::test]
async fn an_event_limit_holds_across_ticket_types_when_one_buyer_races(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 32).await;
    let specs = [
        TicketSpec::new(50, 2, 2),
        TicketSpec::new(50, 2, 2),
        TicketSpec::new(50, 2, 2),
    ];
    let fixture = published_event(&pool, &specs).await;
    sqlx::query("UPDATE events SET max_per_buyer = 3 WHERE id = $1")
        .bind(fixture.event_id)
        .execute(&pool)
        .await
        .unwrap();
    let spellings = ["ada@example.org", "ADA+x@example.org", "ａｄａ@example.org"];
    let requests: Vec<_> = (0..60)
        .map(|i| {
            let tt = fixture.ticket_type_ids[i % 3];
            request(tt, 1 + (i as i64 / 3 % 2), spellings[i % 3], &fresh_key())
        })
        .collect();

    let results = race(&pool, requests).await;

    assert_invariants(&pool).await;
    let held: i64 = count_sold_in_event(&pool).await;
    assert!(held <= 3, "one buyer holds {held} in the event, limit 3");
    assert!(
        held >= 2,
        "the buyer should get close to the limit, got {held}"
    );
    for (_, result) in &results {
        match result {
            Ok(Purchase::Created { .. })
            | Err(AppError::EventBuyerLimit { max: 3 })
            | Err(AppError::BuyerLimit { max: 2 }) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    // Another buyer is not affected by this one's holdings.
    assert!(
        buy_now(&pool, fixture.ticket_type_ids[0], 2, "bob@example.org")
            .await
            .is_ok()
    );
    // Asking for more than the event allows at once is refused before writing.
    sqlx::query("UPDATE events SET max_per_buyer = 1 WHERE id = $1")
        .bind(fixture.event_id)
        .execute(&pool)
        .await
        .unwrap();
    let over = buy_now(&pool, fixture.ticket_type_ids[1], 2, "cy@example.org").await;
    assert!(
        matches!(over, Err(AppError::EventBuyerLimit { max: 1 })),
        "{over:?}"
    );
    // (Lowering a limit keeps what buyers already hold; back to 3 for the check.)
    sqlx::query("UPDATE events SET max_per_buyer = 3 WHERE id = $1")
        .bind(fixture.event_id)
        .execute(&pool)
        .await
        .unwrap();
    assert_invariants(&pool).await;
    pool.close().await;
}

async fn count_sold_in_event(pool: &PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT COALESCE(SUM(quantity), 0)::int8 FROM orders WHERE status = 'confirmed'",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

#[sqlx::test]
async fn one_buyer_firing_fifty_purchases_gets_at_most_the_buyer_limit(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = rush(connect, TicketSpec::new(100, 2, 4)).await;
    let tt = fixture.ticket_type_id();
    // The same person, spelled differently: normalisation makes one buyer.
    let spellings = [
        "scalper@example.org",
        "Scalper@Example.org",
        " SCALPER@example.org ",
    ];
    let requests: Vec<_> = (0..50)
        .map(|i| request(tt, 1 + (i % 2), spellings[i as usize % 3], &fresh_key()))
        .collect();

    let results = race(&pool, requests).await;

    assert_invariants(&pool).await;
    let held = sold(&pool, tt).await;
    assert!(held <= 4, "one buyer holds {held} tickets, limit 4");
    // Stock was plentiful, so the buyer reached the limit (or stopped one short
    // when only 2-ticket requests were left); every refusal names the limit.
    assert!(
        held >= 3,
        "the buyer should get close to the limit, got {held}"
    );
    for (_, result) in &results {
        match result {
            Ok(Purchase::Created { .. }) => {}
            Err(AppError::BuyerLimit { max: 4 }) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    let holding: i32 =
        sqlx::query_scalar("SELECT quantity FROM buyer_holdings WHERE ticket_type_id = $1")
            .bind(tt)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(i64::from(holding), held);
    pool.close().await;
}

#[sqlx::test]
async fn the_same_idempotency_key_twenty_times_at_once_makes_one_order(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = rush(connect, TicketSpec::new(50, 4, 4)).await;
    let tt = fixture.ticket_type_id();
    let key = fresh_key();
    let requests: Vec<_> = (0..20)
        .map(|_| request(tt, 2, "ada@example.org", &key))
        .collect();

    let results = race(&pool, requests).await;

    assert_invariants(&pool).await;
    assert_eq!(order_count(&pool).await, 1);
    assert_eq!(sold(&pool, tt).await, 2);
    let ids: BTreeSet<Uuid> = results
        .iter()
        .map(|(_, r)| r.as_ref().expect("no error for a replay").order().id.get())
        .collect();
    assert_eq!(
        ids,
        confirmed_order_ids(&pool).await,
        "all twenty answers name the one order"
    );
    let created = results
        .iter()
        .filter(|(_, r)| matches!(r, Ok(Purchase::Created { .. })))
        .count();
    assert_eq!(created, 1);

    // The same key for a different purchase is refused and writes nothing.
    let conflict = sale::purchase(&pool, now(), &request(tt, 3, "ada@example.org", &key)).await;
    assert!(
        matches!(conflict, Err(AppError::IdempotencyConflict)),
        "{conflict:?}"
    );
    // Another buyer may use the same key string for their own order.
    let other = sale::purchase(&pool, now(), &request(tt, 1, "bob@example.org", &key))
        .await
        .unwrap();
    assert!(matches!(other, Purchase::Created { .. }));
    assert_eq!(order_count(&pool).await, 2);
    assert_invariants(&pool).await;
    pool.close().await;
}
