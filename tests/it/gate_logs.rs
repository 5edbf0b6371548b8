//! What the Redis gate (issue 9) logs when Redis goes down and comes
//! back: once each. In a binary of its own, so that its subscriber is the
//! process's only one: with other tests setting and dropping theirs on
//! other threads, tracing's cached interest could switch a callsite off
//! for this test's thread (seen: the "back" line lost).

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::{
    TicketSpec, assert_invariants,
    gate::own_gate,
    logs::Captured,
    now,
    purchase::{fresh_key, request},
    redis_servers::OwnRedis,
    sold, until_listening,
};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

/// Redis down: the gate says so once, however many purchases find it
/// down, and once that it is back.
#[sqlx::test]
async fn redis_down_and_back_are_each_logged_once(_: PgPoolOptions, connect: PgConnectOptions) {
    const DOWN: &str = "Redis gate unavailable";
    const BACK: &str = "Redis gate back";
    // The process's one subscriber: this process runs this test alone.
    let logs = Captured::install();
    let (pool, tt, mut own, sales) = own_gate(
        connect,
        TicketSpec::new(50, 1, 1),
        Duration::from_secs(3600),
    )
    .await;
    let port = own.port;
    until_listening(&pool, 2).await;
    let buy = async |tag: &str| {
        sales
            .purchase(
                now(),
                &request(tt, 1, &format!("{tag}@example.org"), &fresh_key()),
            )
            .await
            .unwrap();
    };
    buy("before").await;
    own.stop();
    for i in 0..3 {
        buy(&format!("down{i}")).await;
        // Past the gate's retry_after: the next purchase asks Redis again.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(logs.count(DOWN), 1, "Redis down, logged");
    assert_eq!(logs.count(BACK), 0);
    let own = OwnRedis::start_on(port);
    own.until_up().await;
    // Purchases until the gate has found Redis back (a busy machine can
    // take a few of them), then two more: it is logged once, not again.
    let mut back: i64 = 0;
    while logs.count(BACK) == 0 && back < 30 {
        buy(&format!("back{back}")).await;
        back += 1;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    for i in 0..2 {
        buy(&format!("again{i}")).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(logs.count(DOWN), 1);
    assert_eq!(logs.count(BACK), 1, "Redis back, logged once");
    assert_eq!(sold(&pool, tt).await, 1 + 3 + back + 2);
    assert_invariants(&pool).await;
}
