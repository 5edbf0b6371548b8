//! Purchases that join a batch: those that come while it waits for the
//! row, and those on their way through the gate to a batch opened ahead.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use sqlx::PgPool;
use time::OffsetDateTime;

use super::support::{
    ROOMY, default_batcher, hold_roomy_row, roomy_buyer, roomy_orders_and_remaining,
    roomy_orders_and_transactions,
};
use crate::{
    domain::TicketTypeId,
    error::AppError,
    sale::{batch::ahead::OnTheWay, outcome::Purchase},
};

/// Purchases that come while a batch waits for the ticket type's row join
/// that batch: released, one transaction sells them all (without this, the
/// first purchase was sold alone and the others waited for its commit).
#[sqlx::test(
    migrations = "./migrations",
    fixtures(path = "../../../../tests/isolation", scripts("fixtures"))
)]
async fn purchases_that_come_while_the_row_is_locked_join_the_batch(db: PgPool) {
    let batcher = default_batcher(&db);
    let holder = hold_roomy_row(&db).await;
    let buyer = roomy_buyer;
    let purchase = |n: usize| {
        let batcher = Arc::clone(&batcher);
        tokio::spawn(async move { batcher.purchase(OffsetDateTime::now_utc(), &buyer(n)).await })
    };
    // The first starts a batch, which waits for the row.
    let first = purchase(0);
    let waiting = Instant::now() + Duration::from_secs(10);
    loop {
        let (locked,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE wait_event_type = 'Lock' AND datname = current_database()",
        )
        .fetch_one(&db)
        .await
        .unwrap();
        if locked > 0 {
            break;
        }
        assert!(
            Instant::now() < waiting,
            "the batch never waited for the row"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let others: Vec<_> = (1..4).map(purchase).collect();
    // A replay-only job (its type taken for sold out) among them waits for
    // the next batch, and is answered there.
    let replay = {
        let batcher = Arc::clone(&batcher);
        tokio::spawn(async move {
            batcher
                .replay_or_sold_out(OffsetDateTime::now_utc(), &buyer(9))
                .await
        })
    };
    // Queued behind the waiting batch before the row is released.
    let queued = Instant::now() + Duration::from_secs(10);
    let queue = batcher.queue(TicketTypeId::from(ROOMY));
    while queue.max_capacity() - queue.capacity() < 4 {
        assert!(Instant::now() < queued, "the others were not queued");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    holder.rollback().await.unwrap();

    for sale in std::iter::once(first).chain(others) {
        let answer = sale.await.unwrap();
        assert!(matches!(answer, Ok(Purchase::Created { .. })), "{answer:?}");
    }
    let replayed = tokio::time::timeout(Duration::from_secs(10), replay)
        .await
        .expect("the replay-only job is answered")
        .unwrap();
    assert!(matches!(replayed, Err(AppError::SoldOut)), "{replayed:?}");
    let (orders, transactions) = roomy_orders_and_transactions(&db).await;
    assert_eq!(orders, 4);
    assert_eq!(transactions, 1, "sold in one transaction");
}

/// Until a transaction of the test's database sits idle holding `roomy`'s
/// row lock (a batch opened ahead, waiting for its purchases); panics
/// after 10 s.
async fn until_a_batch_waits_ahead(db: &PgPool) {
    let waiting = Instant::now() + Duration::from_secs(10);
    loop {
        let (idle,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE state = 'idle in transaction' AND datname = current_database()",
        )
        .fetch_one(db)
        .await
        .unwrap();
        if idle > 0 {
            return;
        }
        assert!(Instant::now() < waiting, "no batch opened ahead");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Behind the gate, the first purchase on its way has the worker open a
/// batch ahead (row locked, event read) while Redis answers; it waits for
/// every purchase on its way, queued or refused, and sells those that came
/// in one transaction. Without the wait, each purchase sold alone.
#[sqlx::test(
    migrations = "./migrations",
    fixtures(path = "../../../../tests/isolation", scripts("fixtures"))
)]
async fn a_batch_opened_ahead_sells_the_purchases_on_their_way_together(db: PgPool) {
    let batcher = default_batcher(&db);
    let roomy = TicketTypeId::from(ROOMY);
    let wait = Duration::from_secs(30);
    let coming: Vec<OnTheWay> = (0..3).map(|_| batcher.on_its_way(roomy, wait)).collect();
    // One more that the gate will refuse: it leaves without a purchase.
    let refused = batcher.on_its_way(roomy, wait);
    until_a_batch_waits_ahead(&db).await;

    // They come one by one, far apart.
    let mut sales = Vec::new();
    for (n, on_its_way) in coming.into_iter().enumerate() {
        let batcher = Arc::clone(&batcher);
        sales.push(tokio::spawn(async move {
            batcher
                .purchase_on_its_way(OffsetDateTime::now_utc(), &roomy_buyer(n), on_its_way)
                .await
        }));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (orders, _) = roomy_orders_and_remaining(&db).await;
    assert_eq!(orders, 0, "the batch waits for the one still on its way");
    drop(refused);

    for sale in sales {
        let answer = tokio::time::timeout(Duration::from_secs(10), sale)
            .await
            .expect("sold once none is on its way")
            .unwrap();
        assert!(matches!(answer, Ok(Purchase::Created { .. })), "{answer:?}");
    }
    let (orders, transactions) = roomy_orders_and_transactions(&db).await;
    assert_eq!(orders, 3);
    assert_eq!(transactions, 1, "sold in one transaction");
}

/// A batch opened ahead for purchases the gate all refused writes nothing
/// and lets the row go at once; a purchase after it sells.
#[sqlx::test(
    migrations = "./migrations",
    fixtures(path = "../../../../tests/isolation", scripts("fixtures"))
)]
async fn a_batch_opened_ahead_that_gets_none_lets_the_row_go(db: PgPool) {
    let batcher = default_batcher(&db);
    let roomy = TicketTypeId::from(ROOMY);
    let refused = batcher.on_its_way(roomy, Duration::from_secs(30));
    until_a_batch_waits_ahead(&db).await;
    let (before, remaining_before) = roomy_orders_and_remaining(&db).await;
    drop(refused);
    // The row is free long before the 30 s wait would end.
    let mut other = db.begin().await.unwrap();
    sqlx::query("SET LOCAL lock_timeout = '5s'")
        .execute(&mut *other)
        .await
        .unwrap();
    sqlx::query("SELECT 1 FROM ticket_types WHERE id = $1 FOR UPDATE")
        .bind(ROOMY)
        .execute(&mut *other)
        .await
        .expect("the batch opened ahead let the row go");
    other.rollback().await.unwrap();
    assert_eq!(
        roomy_orders_and_remaining(&db).await,
        (before, remaining_before)
    );

    let answer = batcher
        .purchase(OffsetDateTime::now_utc(), &roomy_buyer(0))
        .await;
    assert!(matches!(answer, Ok(Purchase::Created { .. })), "{answer:?}");
}
