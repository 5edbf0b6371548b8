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
    let closes = [None, Some(opens + Duration::hours(1))];
    // Without a close time the sale closes at the event's start.
    let starts = opens + Duration::hours(2);
    let moments = [
        opens - Duration::days(1),
        opens - Duration::microseconds(1),
        opens,
        opens + Duration::microseconds(1),
        opens + Duration::hours(1) - Duration::microseconds(1),
        opens + Duration::hours(1),
        starts - Duration::microseconds(1),
        starts,
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
    assert_eq!(checked, 54);
}
