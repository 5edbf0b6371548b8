//! What a batch decides for each of its requests, and whom it sells to.

use std::{collections::HashMap, sync::Arc, time::Duration};

use sqlx::PgPool;
use time::OffsetDateTime;
use tokio::sync::oneshot;

use super::support::{ROOMY, roomy_orders_and_remaining, sell_as_one_batch, two_jobs};
use crate::{
    domain::{
        BuyerKey, BuyerLimits, ConfirmKey, Email, EventId, EventStatus, IdempotencyKey, Quantity,
        SaleWindow, TicketTypeId,
    },
    error::AppError,
    sale::{
        batch::{
            decide::{Decision, Rules, decide},
            job::Job,
            rows::{Held, Locked, order_key},
            settings::EngineSettings,
            unproven::Unproven,
            worker::Batcher,
        },
        outcome::Purchase,
        request::PurchaseRequest,
        sold_out::SoldOut,
    },
};

/// Two buyers who happen to send the same idempotency key (a key is the
/// buyer's own, not global) are two purchases, sold in the one batch: the
/// written rows are matched back to their requests by buyer *and* key.
#[sqlx::test(
    migrations = "./migrations",
    fixtures(path = "../../../../tests/isolation", scripts("fixtures"))
)]
async fn two_buyers_with_one_key_are_sold_in_one_batch(db: PgPool) {
    let (mut jobs, answers) = two_jobs([Duration::from_secs(20); 2]);
    jobs[1].request.idempotency_key = jobs[0].request.idempotency_key.clone();
    for answer in sell_as_one_batch(&db, (jobs, answers)).await {
        assert!(matches!(answer, Ok(Purchase::Created { .. })), "{answer:?}");
    }
    assert_eq!(roomy_orders_and_remaining(&db).await, (2, 8));
    let transactions: i64 = sqlx::query_scalar(
        "SELECT count(DISTINCT xmin::text) FROM orders WHERE ticket_type_id = $1",
    )
    .bind(ROOMY)
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!(transactions, 1, "the batch failed and sold them one by one");
}

/// A request that names its event is sold only if the ticket type is
/// that event's (the batch's own check, behind the pre-check's).
#[sqlx::test(
    migrations = "./migrations",
    fixtures(path = "../../../../tests/isolation", scripts("fixtures"))
)]
async fn a_batch_sells_only_for_the_event_the_request_names(db: PgPool) {
    let sold_out = Arc::new(SoldOut::new(Duration::from_secs(1), None));
    let batcher = Batcher::new(
        db.clone(),
        EngineSettings::default(),
        sold_out,
        ConfirmKey::random(),
    );
    let (mut jobs, answers) = two_jobs([Duration::from_secs(20); 2]);
    let show = uuid::uuid!("00000000-0000-0000-0000-0000000000e1");
    jobs[0].request.event_id = Some(EventId::from(show));
    jobs[1].request.event_id = Some(EventId::from(uuid::Uuid::new_v4()));

    batcher.sell(TicketTypeId::from(ROOMY), jobs).await;

    let answers: Vec<_> = futures::future::join_all(answers).await;
    assert!(
        matches!(answers[0], Ok(Ok(Purchase::Created { .. }))),
        "{:?}",
        answers[0]
    );
    assert!(
        matches!(answers[1], Ok(Err(AppError::NotFound))),
        "{:?}",
        answers[1]
    );
    assert_eq!(roomy_orders_and_remaining(&db).await, (1, 9));
}

/// Within one batch each request is decided against what the ones
/// before it took: the stock and the buyer's counts (of the type and of
/// the event). The write would refuse a batch that took more, and the
/// requests would then be sold one by one: right, but slow.
#[test]
fn a_batch_decides_each_request_against_the_ones_before_it() {
    let (jobs, _answers) = two_jobs([Duration::from_secs(20); 2]);
    let mut jobs = jobs.into_iter();
    let (Some(first), Some(second)) = (jobs.next(), jobs.next()) else {
        unreachable!("two jobs")
    };
    let same_buyer = Job {
        request: PurchaseRequest {
            idempotency_key: IdempotencyKey::generate(),
            ..first.request.clone()
        },
        buyer: first.buyer.clone(),
        reply: oneshot::channel().0,
        ..first
    };
    let third = Job {
        request: PurchaseRequest {
            email: Email::parse("buyer2@example.org").unwrap(),
            idempotency_key: IdempotencyKey::generate(),
            ..second.request.clone()
        },
        buyer: Some(BuyerKey::from(&Email::parse("buyer2@example.org").unwrap())),
        reply: oneshot::channel().0,
        ..second
    };
    let jobs = [first, same_buyer, second, third];
    let buyers: Vec<BuyerKey> = jobs.iter().map(|j| j.buyer.clone().unwrap()).collect();
    let window = SaleWindow {
        status: EventStatus::Published,
        opens_at: OffsetDateTime::UNIX_EPOCH,
        closes_at: None,
        starts_at: OffsetDateTime::now_utc() + time::Duration::days(30),
    };
    let decide_with = |per_event: Option<i32>, remaining: i32| {
        let locked = Locked {
            event_id: uuid::Uuid::new_v4(),
            remaining,
            max_per_order: 2,
            max_per_buyer: 5,
            sales_halted: false,
            price_minor: 1000,
            currency: "EUR".into(),
            hidden: false,
        };
        let limits = BuyerLimits {
            per_ticket_type: 5,
            per_event,
        };
        let held = Held {
            of_type: HashMap::new(),
            in_event: HashMap::new(),
        };
        let existing = HashMap::new();
        let rules = Rules {
            locked: &locked,
            limits,
            window: &window,
            existing: &existing,
        };
        decide(
            &jobs,
            &buyers,
            &rules,
            held,
            HashMap::new(),
            &mut Unproven::default(),
        )
        .into_iter()
        .map(|d| match d {
            Decision::Sell { .. } => "sell".to_owned(),
            Decision::Refuse(err) => err.code().to_owned(),
            Decision::Replay(_) => "replay".to_owned(),
            Decision::Twin => "twin".to_owned(),
        })
        .collect::<Vec<_>>()
    };
    // Two left: the first two sell, the rest find none.
    assert_eq!(
        decide_with(None, 2),
        ["sell", "sell", "sold_out", "sold_out"]
    );
    // One per buyer in the event: buyer0's second is refused, buyer1
    // and buyer2 buy.
    assert_eq!(
        decide_with(Some(1), 10),
        ["sell", "limit_exceeded", "sell", "sell"]
    );
}

#[test]
fn a_purchase_is_the_same_one_by_its_buyer_and_key() {
    let request = PurchaseRequest {
        event_id: None,
        ticket_type_id: TicketTypeId::from(uuid::Uuid::new_v4()),
        quantity: Quantity::new(1).unwrap(),
        email: Email::parse("Ada@Example.org").unwrap(),
        idempotency_key: IdempotencyKey::parse("key-0123456789abcdef").unwrap(),
        pass: None,
        queue_entry: None,
        presale_code: None,
        client: None,
    };
    assert_eq!(
        order_key(&request),
        (
            "ada@example.org".to_owned(),
            "key-0123456789abcdef".to_owned()
        )
    );
}
