//! The Redis gate's counters built ahead of the rush (issue 9), against real
//! Redis and Postgres: a sale counted in Redis once published, before its
//! first purchase; at start-up the open and coming sales counted, not the
//! far, the draft or the sold out; a hash Redis lost before any purchase
//! put back by the periodic reconcile.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::{collections::HashMap, time::Duration};

use common::{
    TicketSpec, assert_invariants, event_with_window, now, pool,
    purchase::{fresh_key, request},
    redis_servers::OwnRedis,
    set_capacity, sold, until_listening,
};
use deadpool_redis::redis;
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use stampede::{
    db,
    domain::EventStatus,
    sale::{EngineSettings, GateRedis, GateSettings, Purchase, Sales, Strategy},
};
use time::Duration as Span;
use uuid::Uuid;

const PREFIX: &str = "stampede:test:ahead:";

/// The engine behind a gate on the test's own Redis, building ahead the
/// sales that open within 15 minutes.
fn gated(pool: &PgPool, own: &OwnRedis, reconcile_every: Duration) -> Sales {
    let settings = GateSettings {
        prefix: PREFIX.into(),
        timeout: Duration::from_millis(500),
        reconcile_every,
        build_ahead: Some(Duration::from_secs(15 * 60)),
        ..GateSettings::default()
    };
    Sales::new(pool.clone(), Strategy::Batch, EngineSettings::default())
        .with_gate(GateRedis::Server(own.url()), settings)
        .unwrap()
}

/// The type's stock hash, field by field (empty: not there).
async fn stock(own: &OwnRedis, tt: Uuid) -> HashMap<String, String> {
    own.cmd(redis::cmd("HGETALL").arg(format!("{PREFIX}{{tt:{tt}}}:stock")))
        .await
        .unwrap()
}

/// Wait (up to 10 s) until Redis counts `left` of the type.
async fn until_left(own: &OwnRedis, tt: Uuid, left: i64) {
    for _ in 0..500 {
        if stock(own, tt).await.get("left") == Some(&left.to_string()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "Redis never counted {left} left: {:?}",
        stock(own, tt).await
    );
}

/// A draft is not counted. Published, its ticket type is counted in Redis
/// with no purchase and no periodic reconcile (an hour away here): the
/// publication's notification builds it. A change of its terms reaches
/// Redis at once too. Its first purchase then asks Redis once, with no
/// rebuild before it.
#[sqlx::test]
async fn a_sale_published_is_counted_before_its_first_purchase(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 8).await;
    let own = OwnRedis::start();
    own.until_up().await;
    let sales = gated(&pool, &own, Duration::from_secs(3600));
    until_listening(&pool, 2).await;

    let opened = now() - Span::hours(1);
    let fixture =
        event_with_window(&pool, opened, None, "draft", &[TicketSpec::new(10, 1, 1)]).await;
    let tt = fixture.ticket_type_id();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(stock(&own, tt).await.is_empty(), "a draft was counted");

    db::events::set_status(
        &pool,
        fixture.organizer_id.into(),
        &Default::default(),
        fixture.event_id.into(),
        EventStatus::Published,
    )
    .await
    .unwrap();
    until_left(&own, tt, 10).await;
    set_capacity(&pool, &fixture, 6).await.unwrap();
    until_left(&own, tt, 6).await;

    let before = own.scripts_run().await;
    let bought = sales
        .purchase(now(), &request(tt, 1, "first@example.org", &fresh_key()))
        .await;
    assert!(matches!(bought, Ok(Purchase::Created { .. })), "{bought:?}");
    assert_eq!(
        own.scripts_run().await - before,
        1,
        "the first purchase ran one script: no rebuild"
    );
    assert_eq!(sales.gate().unwrap().admitted(), 1);
    until_left(&own, tt, 5).await;
    assert_eq!(sold(&pool, tt).await, 1);
    assert_invariants(&pool).await;
}

/// A gate that starts counts, before any purchase, the sales open now and
/// those opening within its window, with their limits; not a sale opening
/// in two days, a draft, or a type sold out. A hash Redis loses before any
/// purchase comes back with the periodic reconcile.
#[sqlx::test]
async fn at_start_the_open_and_coming_sales_are_counted_and_a_lost_one_comes_back(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 8).await;
    let spec = || [TicketSpec::new(10, 2, 4)];
    let ago = now() - Span::hours(1);
    let event = async |opens, status| {
        event_with_window(&pool, opens, None, status, &spec())
            .await
            .ticket_type_id()
    };
    let open = event(ago, "published").await;
    let coming = event(now() + Span::minutes(5), "published").await;
    let far = event(now() + Span::days(2), "published").await;
    let draft = event(ago, "draft").await;
    let sold_out = event(ago, "published").await;
    let plain = Sales::new(pool.clone(), Strategy::Batch, EngineSettings::default());
    for i in 0..5 {
        let req = request(sold_out, 2, &format!("early{i}@example.org"), &fresh_key());
        plain.purchase(now(), &req).await.unwrap();
    }

    let own = OwnRedis::start();
    own.until_up().await;
    let sales = gated(&pool, &own, Duration::from_millis(300));
    until_left(&own, open, 10).await;
    until_left(&own, coming, 10).await;
    let hash = stock(&own, open).await;
    assert_eq!(
        (hash["limit"].as_str(), hash["per_order"].as_str()),
        ("4", "2")
    );
    for (tt, what) in [
        (far, "two days away"),
        (draft, "draft"),
        (sold_out, "sold out"),
    ] {
        assert!(
            stock(&own, tt).await.is_empty(),
            "a {what} sale was counted"
        );
    }

    let _: String = own.cmd(&mut redis::cmd("FLUSHALL")).await.unwrap();
    until_left(&own, open, 10).await;
    until_left(&own, coming, 10).await;
    let bought = sales
        .purchase(now(), &request(open, 2, "fan@example.org", &fresh_key()))
        .await;
    assert!(matches!(bought, Ok(Purchase::Created { .. })), "{bought:?}");
    assert_eq!(sales.gate().unwrap().admitted(), 1);
    assert_eq!(sold(&pool, open).await, 2);
    assert_eq!(sold(&pool, sold_out).await, 10);
    assert_invariants(&pool).await;
}
