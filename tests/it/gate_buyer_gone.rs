//! A buyer who goes away after the Redis gate admitted the purchase (issue
//! 9), against real Redis and Postgres: the sale is still decided, and
//! Redis ends where Postgres is: the purchase that committed is settled,
//! the one Postgres refused gives its counts back.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::{collections::HashMap, time::Duration};

use common::{
    TicketSpec, assert_invariants,
    locks::{hold_ticket_type, wait_until_blocked},
    now, pool, published_event,
    purchase::{fresh_key, request},
    redis_servers::OwnRedis,
    remaining, sold, until_listening,
};
use deadpool_redis::redis;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use stampede::sale::{EngineSettings, GateRedis, GateSettings, Sales, Strategy};
use uuid::Uuid;

const PREFIX: &str = "stampede:test:gone:";

async fn stock(own: &OwnRedis, tt: Uuid) -> HashMap<String, String> {
    own.cmd(redis::cmd("HGETALL").arg(format!("{PREFIX}{{tt:{tt}}}:stock")))
        .await
        .unwrap()
}

async fn in_flight(own: &OwnRedis, tt: Uuid) -> i64 {
    own.cmd(redis::cmd("ZCARD").arg(format!("{PREFIX}{{tt:{tt}}}:inflight")))
        .await
        .unwrap()
}

/// Wait (up to 10 s) until Redis counts what Postgres has left and holds
/// no admission in flight.
async fn until_redis_agrees(own: &OwnRedis, pool: &sqlx::PgPool, tt: Uuid) {
    let mut last = (HashMap::new(), 0, 0);
    for _ in 0..500 {
        let left = remaining(pool, tt).await;
        let (hash, flying) = (stock(own, tt).await, in_flight(own, tt).await);
        if hash.get("left") == Some(&left.to_string()) && flying == 0 {
            return;
        }
        last = (hash, flying, left);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "Redis {:?} with {} in flight; Postgres has {} left",
        last.0, last.1, last.2
    );
}

/// Two buyers admitted, each waiting in Postgres behind the ticket type's
/// row, go away (their requests dropped): both sales still commit, and
/// each is settled in Redis. A third goes away the same way, and Postgres
/// refuses it (the event unpublished under it): its counts come back. No
/// periodic rebuild runs meanwhile (an hour away) to hide a miss.
#[sqlx::test]
async fn a_buyer_gone_after_admission_leaves_redis_where_postgres_is(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 16).await;
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 4)]).await;
    let tt = fixture.ticket_type_id();
    let own = OwnRedis::start();
    own.until_up().await;
    let settings = GateSettings {
        prefix: PREFIX.into(),
        timeout: Duration::from_secs(1),
        reconcile_every: Duration::from_secs(3600),
        ..GateSettings::default()
    };
    // One transaction per purchase, so that each waits in Postgres visibly.
    let sales = Sales::new(pool.clone(), Strategy::Naive, EngineSettings::default())
        .with_gate(GateRedis::Server(own.url()), settings)
        .unwrap();
    until_listening(&pool, 2).await;
    let buy = |quantity, email: &str| {
        let sales = sales.clone();
        let req = request(tt, quantity, email, &fresh_key());
        tokio::spawn(async move { sales.purchase(now(), &req).await })
    };

    let hold = hold_ticket_type(&pool, tt).await;
    let a = buy(2, "a@example.org");
    wait_until_blocked(&pool, "UPDATE ticket_types", 1).await;
    let b = buy(1, "b@example.org");
    wait_until_blocked(&pool, "UPDATE ticket_types", 2).await;
    assert_eq!(stock(&own, tt).await["left"], "7");
    assert_eq!(in_flight(&own, tt).await, 2);
    for gone in [a, b] {
        gone.abort();
        assert!(gone.await.unwrap_err().is_cancelled());
    }
    hold.tx.commit().await.unwrap();
    until_redis_agrees(&own, &pool, tt).await;
    assert_eq!(sold(&pool, tt).await, 3, "the sales of the buyers gone");

    let mut hold = hold_ticket_type(&pool, tt).await;
    let c = buy(2, "c@example.org");
    wait_until_blocked(&pool, "UPDATE ticket_types", 1).await;
    assert_eq!(stock(&own, tt).await["left"], "5");
    c.abort();
    assert!(c.await.unwrap_err().is_cancelled());
    sqlx::query("UPDATE events SET status = 'draft' WHERE id = $1")
        .bind(fixture.event_id)
        .execute(&mut *hold.tx)
        .await
        .unwrap();
    hold.tx.commit().await.unwrap();
    until_redis_agrees(&own, &pool, tt).await;
    assert_eq!(stock(&own, tt).await["left"], "7", "given back");
    assert_eq!(sold(&pool, tt).await, 3);
    assert_invariants(&pool).await;
}
