//! The sale transaction's own guards, reached: each test holds a purchase
//! between its pre-check and its stock `UPDATE` (a test transaction holds
//! the ticket type's row lock, and Postgres shows the purchase queued behind
//! it), changes what the guard checks in that transaction, commits, and
//! then the purchase must be refused with nothing written. The pre-check
//! already passed, so only the guards inside the transaction can refuse.
//! Also the time rules around the event's start. Every purchase goes
//! through `common::purchase::buy`, so these run against any strategy.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{
    TicketSpec, assert_invariants,
    locks::{hold_ticket_type, wait_until_blocked},
    now, pool, published_event,
    purchase::{assert_nothing_sold, buy, purchase_request},
};
use sqlx::{PgPool, postgres::PgConnectOptions};
use stampede::{
    error::AppError,
    sale::{self, EngineSettings, Sales, Strategy},
};
use time::{Duration as Span, OffsetDateTime};
use uuid::Uuid;

/// What a test changes while the purchase waits: a statement whose `$1` is
/// the event's id or the ticket type's.
#[derive(Clone, Copy)]
enum On {
    Event,
    TicketType,
}

/// Hold a purchase of 2 (of 10, at most 4 per order) on the row lock, run
/// `change` in the holding transaction, release, and return the outcome:
/// once for the one-transaction path (`naive`), whose stock `UPDATE` waits,
/// and once for the engine (`batch`), whose `SELECT ... FOR UPDATE` waits.
async fn purchase_across(
    connect: PgConnectOptions,
    change: &str,
    on: On,
) -> Vec<(PgPool, Uuid, Result<sale::Purchase, AppError>)> {
    let mut outcomes = Vec::new();
    for strategy in [Strategy::Naive, Strategy::Batch] {
        outcomes.push(purchase_across_with(connect.clone(), change, on, strategy).await);
    }
    outcomes
}

async fn purchase_across_with(
    connect: PgConnectOptions,
    change: &str,
    on: On,
    strategy: Strategy,
) -> (PgPool, Uuid, Result<sale::Purchase, AppError>) {
    let pool = pool(connect, 8).await;
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let ticket_type_id = fixture.ticket_type_id();
    let mut hold = hold_ticket_type(&pool, ticket_type_id).await;

    let at = now();
    let request = purchase_request(ticket_type_id, 2, "waiting@example.org");
    let sales = Sales::new(pool.clone(), strategy, EngineSettings::default());
    let waiting = tokio::spawn(async move { sales.purchase(at, &request).await });
    // Past the pre-check (and the naive path's first writes), queued on the
    // row: the naive path's stock UPDATE, the engine's row lock.
    let queued = match strategy {
        Strategy::Batch => "SELECT event_id, remaining",
        _ => "UPDATE ticket_types",
    };
    wait_until_blocked(&pool, queued, 1).await;

    let id = match on {
        On::Event => fixture.event_id,
        On::TicketType => ticket_type_id,
    };
    let changed = sqlx::query(change)
        .bind(id)
        .execute(&mut *hold.tx)
        .await
        .unwrap();
    assert_eq!(changed.rows_affected(), 1, "{change}");
    hold.tx.commit().await.unwrap();

    let outcome = waiting.await.unwrap();
    (pool, ticket_type_id, outcome)
}

#[sqlx::test]
async fn closing_the_sale_stops_a_purchase_waiting_on_its_row(
    _: sqlx::postgres::PgPoolOptions,
    connect: PgConnectOptions,
) {
    for (pool, ticket_type_id, outcome) in purchase_across(
        connect,
        "UPDATE events SET sale_closes_at = sale_opens_at + interval '1 second' WHERE id = $1",
        On::Event,
    )
    .await
    {
        assert!(
            matches!(outcome, Err(AppError::SaleClosed(_))),
            "{outcome:?}"
        );
        assert_nothing_sold(&pool, ticket_type_id).await;
        assert_invariants(&pool).await;
    }
}

#[sqlx::test]
async fn the_event_starting_stops_a_purchase_waiting_on_its_row(
    _: sqlx::postgres::PgPoolOptions,
    connect: PgConnectOptions,
) {
    // No close time: the sale closes at the start, which the organizer moves
    // to a minute ago.
    for (pool, ticket_type_id, outcome) in purchase_across(
        connect,
        "UPDATE events SET starts_at = now() - interval '1 minute' WHERE id = $1",
        On::Event,
    )
    .await
    {
        assert!(
            matches!(outcome, Err(AppError::SaleClosed(_))),
            "{outcome:?}"
        );
        assert_nothing_sold(&pool, ticket_type_id).await;
        assert_invariants(&pool).await;
    }
}

#[sqlx::test]
async fn unpublishing_stops_a_purchase_waiting_on_its_row(
    _: sqlx::postgres::PgPoolOptions,
    connect: PgConnectOptions,
) {
    for (pool, ticket_type_id, outcome) in purchase_across(
        connect,
        "UPDATE events SET status = 'draft' WHERE id = $1",
        On::Event,
    )
    .await
    {
        // A draft is not for sale, nor visible: not found.
        assert!(matches!(outcome, Err(AppError::NotFound)), "{outcome:?}");
        assert_nothing_sold(&pool, ticket_type_id).await;
        assert_invariants(&pool).await;
    }
}

#[sqlx::test]
async fn cancelling_the_event_stops_a_purchase_waiting_on_its_row(
    _: sqlx::postgres::PgPoolOptions,
    connect: PgConnectOptions,
) {
    // The event's status alone, without `sales_halted`.
    for (pool, ticket_type_id, outcome) in purchase_across(
        connect,
        "UPDATE events SET status = 'cancelled' WHERE id = $1",
        On::Event,
    )
    .await
    {
        assert!(
            matches!(outcome, Err(AppError::SaleClosed(_))),
            "{outcome:?}"
        );
        assert_nothing_sold(&pool, ticket_type_id).await;
        assert_invariants(&pool).await;
    }
}

#[sqlx::test]
async fn lowering_the_order_limit_stops_a_purchase_waiting_on_its_row(
    _: sqlx::postgres::PgPoolOptions,
    connect: PgConnectOptions,
) {
    for (pool, ticket_type_id, outcome) in purchase_across(
        connect,
        "UPDATE ticket_types SET max_per_order = 1 WHERE id = $1",
        On::TicketType,
    )
    .await
    {
        assert!(
            matches!(outcome, Err(AppError::OrderLimit { max: 1 })),
            "{outcome:?}"
        );
        assert_nothing_sold(&pool, ticket_type_id).await;
        assert_invariants(&pool).await;
    }
}

#[sqlx::test]
async fn halting_the_sale_stops_a_purchase_waiting_on_its_row(
    _: sqlx::postgres::PgPoolOptions,
    connect: PgConnectOptions,
) {
    for (pool, ticket_type_id, outcome) in purchase_across(
        connect,
        "UPDATE ticket_types SET sales_halted = true WHERE id = $1",
        On::TicketType,
    )
    .await
    {
        assert!(
            matches!(outcome, Err(AppError::SaleClosed(_))),
            "{outcome:?}"
        );
        assert_nothing_sold(&pool, ticket_type_id).await;
        assert_invariants(&pool).await;
    }
}

/// The control: a change the guards do not care about lets the waiting
/// purchase through, so the refusals above come from the guards.
#[sqlx::test]
async fn a_purchase_waiting_on_its_row_goes_through_when_nothing_relevant_changed(
    _: sqlx::postgres::PgPoolOptions,
    connect: PgConnectOptions,
) {
    for (pool, ticket_type_id, outcome) in purchase_across(
        connect,
        "UPDATE events SET title = 'Renamed' WHERE id = $1",
        On::Event,
    )
    .await
    {
        assert!(
            matches!(outcome, Ok(sale::Purchase::Created { .. })),
            "{outcome:?}"
        );
        let sold = assert_invariants(&pool).await;
        assert!(sold.contains(&(ticket_type_id, 2)), "{sold:?}");
    }
}

/// The event's start, from the table.
async fn starts_at(pool: &PgPool, event_id: Uuid) -> OffsetDateTime {
    common::scalar(pool, "SELECT starts_at FROM events WHERE id = $1", event_id).await
}

#[sqlx::test]
async fn a_sale_without_a_close_time_closes_when_the_event_starts(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let ticket_type_id = fixture.ticket_type_id();
    let starts = starts_at(&pool, fixture.event_id).await;

    let at_start = buy(
        &pool,
        starts,
        &purchase_request(ticket_type_id, 1, "late@example.org"),
    )
    .await;
    assert!(
        matches!(at_start, Err(AppError::SaleClosed(_))),
        "{at_start:?}"
    );
    let after = buy(
        &pool,
        starts + Span::days(1),
        &purchase_request(ticket_type_id, 1, "later@example.org"),
    )
    .await;
    assert!(matches!(after, Err(AppError::SaleClosed(_))), "{after:?}");
    assert_nothing_sold(&pool, ticket_type_id).await;

    let just_before = buy(
        &pool,
        starts - Span::microseconds(1),
        &purchase_request(ticket_type_id, 1, "just-in-time@example.org"),
    )
    .await;
    assert!(
        matches!(just_before, Ok(sale::Purchase::Created { .. })),
        "{just_before:?}"
    );
    assert_eq!(assert_invariants(&pool).await, vec![(ticket_type_id, 1)]);
}

#[sqlx::test]
async fn an_order_cannot_be_cancelled_once_the_event_has_started(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let ticket_type_id = fixture.ticket_type_id();
    let starts = starts_at(&pool, fixture.event_id).await;
    let purchase = buy(
        &pool,
        now(),
        &purchase_request(ticket_type_id, 3, "early@example.org"),
    )
    .await
    .unwrap();
    let (order, secret) = (purchase.order().id, purchase.cancel_secret());

    for at in [starts, starts + Span::days(1)] {
        let refused = sale::cancel(&pool, at, order, secret).await;
        assert!(
            matches!(refused, Err(AppError::EventStarted)),
            "{refused:?}"
        );
        assert_eq!(refused.unwrap_err().status(), http::StatusCode::CONFLICT);
    }
    // Nothing moved: the order stands, its seats stay sold, its buyer holds them.
    assert_eq!(common::order_status(&pool, order.get()).await, "confirmed");
    assert_eq!(common::remaining(&pool, ticket_type_id).await, 7);
    assert_eq!(assert_invariants(&pool).await, vec![(ticket_type_id, 3)]);

    // Up to the start, it can.
    let cancelled = sale::cancel(&pool, starts - Span::microseconds(1), order, secret).await;
    assert!(cancelled.is_ok(), "{cancelled:?}");
    assert_eq!(common::remaining(&pool, ticket_type_id).await, 10);
    assert_eq!(assert_invariants(&pool).await, vec![(ticket_type_id, 0)]);
}

/// Cancelling an event cancels its live orders (and says how many), puts
/// their tickets back, frees its buyers' holdings and stops its sale; the
/// orders of other events stay; a second call has nothing left to cancel.
#[sqlx::test]
async fn cancelling_an_event_cancels_its_orders_and_stops_its_sale(pool: PgPool) {
    let fixture = published_event(
        &pool,
        &[TicketSpec::new(10, 4, 4), TicketSpec::new(5, 2, 2)],
    )
    .await;
    let (first, second) = (fixture.ticket_type_ids[0], fixture.ticket_type_ids[1]);
    let other = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let mut orders = Vec::new();
    for (ticket_type_id, quantity, email) in [
        (first, 3, "ada@example.org"),
        (first, 2, "bob@example.org"),
        (second, 1, "ada@example.org"),
    ] {
        let request = purchase_request(ticket_type_id, quantity, email);
        orders.push(buy(&pool, now(), &request).await.unwrap().order().id);
    }
    let request = purchase_request(other.ticket_type_id(), 1, "ada@example.org");
    let elsewhere = buy(&pool, now(), &request).await.unwrap().order().id;

    let cancel = || sale::cancel_event(&pool, fixture.organizer_id.into(), fixture.event_id.into());
    assert_eq!(cancel().await.unwrap(), 3);
    for order in &orders {
        assert_eq!(common::order_status(&pool, order.get()).await, "cancelled");
    }
    assert_eq!(
        common::order_status(&pool, elsewhere.get()).await,
        "confirmed"
    );
    assert_eq!(
        common::event_status(&pool, fixture.event_id).await,
        "cancelled"
    );
    assert_eq!(common::remaining(&pool, first).await, 10);
    assert_eq!(common::remaining(&pool, second).await, 5);
    let mut sold = vec![(first, 0), (second, 0), (other.ticket_type_id(), 1)];
    sold.sort();
    assert_eq!(assert_invariants(&pool).await, sold);

    let late = buy(
        &pool,
        now(),
        &purchase_request(first, 1, "late@example.org"),
    )
    .await;
    assert!(matches!(late, Err(AppError::SaleClosed(_))), "{late:?}");
    assert_eq!(cancel().await.unwrap(), 0);
    assert_eq!(common::remaining(&pool, first).await, 10);
}
