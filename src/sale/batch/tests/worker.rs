//! A worker's life: it starts with its queue and stops when idle.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use sqlx::postgres::PgPoolOptions;
use time::OffsetDateTime;
use tokio::sync::oneshot;

use crate::{
    domain::{ConfirmKey, Email, IdempotencyKey, Quantity, TicketTypeId},
    error::AppError,
    sale::{
        batch::{job::Job, settings::EngineSettings, worker::Batcher},
        request::PurchaseRequest,
        sold_out::SoldOut,
    },
};

/// An idle worker closes its queue, sells what slipped in before the
/// close, and stops; the next purchase starts a new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_sells_what_slipped_in_then_stops() {
    // Nothing listens on port 1: every read fails at once, which the
    // worker answers with 503. Only whether it answers matters here.
    let db = PgPoolOptions::new()
        .acquire_timeout(Duration::from_secs(2))
        .connect_lazy("postgres://127.0.0.1:1/none")
        .unwrap();
    let settings = EngineSettings {
        idle_worker: Duration::from_millis(100),
        ..EngineSettings::default()
    };
    let sold_out = Arc::new(SoldOut::new(settings.sold_out_lifetime, None));
    let batcher = Arc::new(Batcher::new(db, settings, sold_out, ConfirmKey::random()));
    let ticket_type_id = TicketTypeId::from(uuid::Uuid::new_v4());
    let request = PurchaseRequest {
        event_id: None,
        ticket_type_id,
        quantity: Quantity::new(1).unwrap(),
        email: Email::parse("ada@example.org").unwrap(),
        idempotency_key: IdempotencyKey::generate(),
        pass: None,
        queue_entry: None,
        presale_code: None,
        client: None,
    };
    let job = |reply| Job {
        now: OffsetDateTime::now_utc(),
        request: request.clone(),
        replay_only: true,
        buyer: None,
        deadline: Instant::now() + Duration::from_secs(10),
        reply,
    };

    // A worker starts with the queue. Hold the queues' lock past its idle
    // time: it times out and waits for the lock to close the queue, and
    // a job sent meanwhile is in the queue when it closes.
    let queue = batcher.queue(ticket_type_id);
    assert_eq!(Arc::strong_count(&batcher), 2, "the worker holds one");
    let (reply, answer) = oneshot::channel();
    {
        let _queues = batcher.queues.lock().unwrap();
        std::thread::sleep(Duration::from_millis(500));
        queue.try_send(job(reply)).unwrap();
    }
    let answer = tokio::time::timeout(Duration::from_secs(10), answer)
        .await
        .expect("the job that slipped in is answered")
        .expect("the worker answers it, not drops it");
    assert!(matches!(answer, Err(AppError::Overloaded)), "{answer:?}");

    // Then it stops: its queue is gone and it no longer holds the batcher.
    let stopped = Instant::now() + Duration::from_secs(5);
    while Arc::strong_count(&batcher) > 1 {
        assert!(Instant::now() < stopped, "the idle worker did not stop");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(queue.is_closed());
    assert!(batcher.queues.lock().unwrap().is_empty());

    // A later purchase starts a new worker and is answered.
    let again = tokio::time::timeout(
        Duration::from_secs(10),
        batcher.replay_or_sold_out(OffsetDateTime::now_utc(), &request),
    )
    .await
    .expect("a later purchase is answered");
    assert!(matches!(again, Err(AppError::Overloaded)), "{again:?}");
}
