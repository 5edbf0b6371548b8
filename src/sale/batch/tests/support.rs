//! What the batch tests share: `roomy`, its buyers and jobs, and engines
//! on the test's database.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use sqlx::PgPool;
use time::OffsetDateTime;
use tokio::sync::oneshot;

use crate::{
    domain::{BuyerKey, ConfirmKey, Email, IdempotencyKey, Quantity, TicketTypeId},
    error::AppError,
    sale::{
        batch::{job::Job, settings::EngineSettings, worker::Batcher},
        outcome::Purchase,
        request::PurchaseRequest,
        sold_out::SoldOut,
    },
};

/// `roomy` of tests/isolation/fixtures.sql: 10 seats, on sale now.
pub(super) const ROOMY: uuid::Uuid = uuid::uuid!("00000000-0000-0000-0000-0000000000a2");

/// Two jobs for `roomy`, one seat each, with the given deadlines.
pub(super) fn two_jobs(
    deadlines: [Duration; 2],
) -> (Vec<Job>, Vec<oneshot::Receiver<Result<Purchase, AppError>>>) {
    let started = Instant::now();
    deadlines
        .iter()
        .enumerate()
        .map(|(n, deadline)| {
            let (reply, answer) = oneshot::channel();
            let email = Email::parse(&format!("buyer{n}@example.org")).unwrap();
            let job = Job {
                now: OffsetDateTime::now_utc(),
                buyer: Some(BuyerKey::from(&email)),
                request: PurchaseRequest {
                    event_id: None,
                    ticket_type_id: TicketTypeId::from(ROOMY),
                    quantity: Quantity::new(1).unwrap(),
                    email,
                    idempotency_key: IdempotencyKey::generate(),
                    pass: None,
                    queue_entry: None,
                    presale_code: None,
                    client: None,
                },
                replay_only: false,
                deadline: started + *deadline,
                reply,
            };
            (job, answer)
        })
        .unzip()
}

/// Sell `jobs` as one batch on a fresh engine; the answers, in order.
pub(super) async fn sell_as_one_batch(
    db: &PgPool,
    (jobs, answers): (Vec<Job>, Vec<oneshot::Receiver<Result<Purchase, AppError>>>),
) -> Vec<Result<Purchase, AppError>> {
    let sold_out = Arc::new(SoldOut::new(Duration::from_secs(1), None));
    let batcher = Batcher::new(
        db.clone(),
        EngineSettings::default(),
        sold_out,
        ConfirmKey::random(),
    );
    batcher.sell(TicketTypeId::from(ROOMY), jobs).await;
    let mut results = Vec::new();
    for answer in answers {
        results.push(answer.await.unwrap());
    }
    results
}

pub(super) async fn roomy_orders_and_remaining(db: &PgPool) -> (i64, i32) {
    sqlx::query_as(
        "SELECT (SELECT count(*) FROM orders WHERE ticket_type_id = $1), \
                (SELECT remaining FROM ticket_types WHERE id = $1)",
    )
    .bind(ROOMY)
    .fetch_one(db)
    .await
    .unwrap()
}

/// Another transaction holding `roomy`'s row (as a cancellation would),
/// until rolled back.
pub(super) async fn hold_roomy_row(db: &PgPool) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut holder = db.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM ticket_types WHERE id = $1 FOR UPDATE")
        .bind(ROOMY)
        .execute(&mut *holder)
        .await
        .unwrap();
    holder
}

/// `roomy`'s orders, and the transactions that wrote them.
pub(super) async fn roomy_orders_and_transactions(db: &PgPool) -> (i64, i64) {
    sqlx::query_as(
        "SELECT count(*), count(DISTINCT xmin::text) FROM orders WHERE ticket_type_id = $1",
    )
    .bind(ROOMY)
    .fetch_one(db)
    .await
    .unwrap()
}

/// An engine with the default settings on `db`.
pub(super) fn default_batcher(db: &PgPool) -> Arc<Batcher> {
    let sold_out = Arc::new(SoldOut::new(Duration::from_secs(1), None));
    Arc::new(Batcher::new(
        db.clone(),
        EngineSettings::default(),
        sold_out,
        ConfirmKey::random(),
    ))
}

/// Buyer `n` of one `roomy` ticket, with a fresh key.
pub(super) fn roomy_buyer(n: usize) -> PurchaseRequest {
    PurchaseRequest {
        event_id: None,
        ticket_type_id: TicketTypeId::from(ROOMY),
        quantity: Quantity::new(1).unwrap(),
        email: Email::parse(&format!("buyer{n}@example.org")).unwrap(),
        idempotency_key: IdempotencyKey::generate(),
        pass: None,
        queue_entry: None,
        presale_code: None,
        client: None,
    }
}
