//! Held orders in tests: make an event hold its orders, the engine that
//! derives their tokens with a known key, and a sweeper run to the end.

use futures::future::join_all;
use sqlx::PgPool;
use stampede::{
    domain::ConfirmKey,
    error::AppError,
    sale::{self, EngineSettings, Order, Purchase, Sales, Strategy},
};
use time::OffsetDateTime;
use uuid::Uuid;

use super::purchase::purchase_request;

/// Make the event hold its orders for `seconds`.
pub async fn hold_for(pool: &PgPool, event_id: Uuid, seconds: i32) {
    sqlx::query("UPDATE events SET hold_seconds = $2 WHERE id = $1")
        .bind(event_id)
        .bind(seconds)
        .execute(pool)
        .await
        .unwrap();
}

/// The batch engine, with the confirmation key the test mails links with.
pub fn engine(pool: &PgPool, key: &ConfirmKey) -> Sales {
    Sales::new(pool.clone(), Strategy::Batch, EngineSettings::default())
        .with_confirm_key(key.clone())
}

/// Sweep until nothing is due at `at`; how many this sweeper expired.
pub async fn sweep(pool: &PgPool, at: OffsetDateTime) -> u64 {
    let mut expired = 0;
    loop {
        let now = sale::expire_holds(pool, at).await.unwrap();
        if now == 0 {
            return expired;
        }
        expired += now;
    }
}

/// `count` buyers, each buying one ticket at `at`, all at once; the orders
/// written, and how many were refused as sold out.
pub async fn burst(
    sales: &Sales,
    ticket_type_id: Uuid,
    at: OffsetDateTime,
    wave: &str,
    count: usize,
) -> (Vec<Order>, usize) {
    let results = join_all((0..count).map(|i| {
        let sales = sales.clone();
        let request = purchase_request(ticket_type_id, 1, &format!("{wave}{i}@example.org"));
        async move { sales.purchase(at, &request).await }
    }))
    .await;
    let mut orders = Vec::new();
    let mut sold_out = 0;
    for result in results {
        match result {
            Ok(Purchase::Created { order, .. }) => orders.push(order),
            Err(AppError::SoldOut | AppError::NotEnoughLeft { .. }) => sold_out += 1,
            other => panic!("unexpected answer: {other:?}"),
        }
    }
    (orders, sold_out)
}

/// Outbox messages of `kind` per order id: (order, how many).
pub async fn messages(pool: &PgPool, kind: &str) -> Vec<(Uuid, i64)> {
    sqlx::query_as(
        "SELECT order_id, count(*) FROM outbox WHERE kind = $1 GROUP BY order_id ORDER BY order_id",
    )
    .bind(kind)
    .fetch_all(pool)
    .await
    .unwrap()
}
