//! The sale-window rule exists once in Rust (`SaleWindow::state`) and once
//! in SQL (`sale_open(...)`, which the sale transaction's conditional UPDATE
//! calls). This checks that the two agree on every edge, the event's start
//! (the close of a sale without a close time) included.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use sqlx::PgPool;
use stampede::domain::{EventStatus, SaleState, SaleWindow};
use time::{Duration, macros::datetime};

#[sqlx::test]
async fn the_sql_sale_window_agrees_with_the_rust_one(pool: PgPool) {
    let opens = datetime!(2027-01-01 10:00 UTC);
    let starts = opens + Duration::hours(2);
    // Without a close time the sale closes at the event's start; a close
    // after the start closes at the start too.
    let closes = [
        None,
        Some(opens + Duration::hours(1)),
        Some(starts + Duration::days(1)),
    ];
    let moments = [
        opens - Duration::days(1),
        opens - Duration::microseconds(1),
        opens,
        opens + Duration::microseconds(1),
        opens + Duration::hours(1) - Duration::microseconds(1),
        opens + Duration::hours(1),
        starts - Duration::microseconds(1),
        starts,
        starts + Duration::hours(1),
        opens + Duration::days(1),
    ];
    let mut checked = 0;
    for status in [
        EventStatus::Draft,
        EventStatus::Published,
        EventStatus::Cancelled,
    ] {
        for closes_at in closes {
            let window = SaleWindow {
                status,
                opens_at: opens,
                closes_at,
                starts_at: starts,
            };
            for now in moments {
                let sql: bool = sqlx::query_scalar("SELECT sale_open($1, $2, $3, $4, $5)")
                    .bind(status.as_str())
                    .bind(opens)
                    .bind(closes_at)
                    .bind(starts)
                    .bind(now)
                    .fetch_one(&pool)
                    .await
                    .unwrap();
                let rust = window.state(now) == SaleState::Open;
                assert_eq!(sql, rust, "{window:?} at {now}");
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 90);
}

/// A close moved past the start of an event that has begun (by hand: the
/// forms refuse it) does not reopen its sale, in either sale path.
#[sqlx::test]
async fn a_close_after_the_start_does_not_reopen_a_started_event(pool: PgPool) {
    let fixture =
        crate::common::published_event(&pool, &[crate::common::TicketSpec::new(10, 2, 2)]).await;
    sqlx::query(
        "UPDATE events SET starts_at = now() - interval '30 minutes',
                           sale_closes_at = now() + interval '1 day'
         WHERE id = $1",
    )
    .bind(fixture.event_id)
    .execute(&pool)
    .await
    .unwrap();
    let now = crate::common::now();
    let request =
        crate::common::purchase::purchase_request(fixture.ticket_type_id(), 1, "late@example.org");
    let refused = stampede::sale::purchase(&pool, now, &request).await;
    assert!(
        matches!(refused, Err(stampede::error::AppError::SaleClosed(_))),
        "{refused:?}"
    );
    let sales = stampede::sale::Sales::new(
        pool.clone(),
        stampede::sale::Strategy::Batch,
        stampede::sale::EngineSettings::default(),
    );
    let refused = sales.purchase(now, &request).await;
    assert!(
        matches!(refused, Err(stampede::error::AppError::SaleClosed(_))),
        "{refused:?}"
    );
    let orders: i64 = sqlx::query_scalar("SELECT count(*) FROM orders")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(orders, 0);
}
