//! The Redis gate (issue 9) on a Redis Cluster the test starts itself
//! (three masters from `redis-server` on loopback ports): the same scripts,
//! routed per ticket type by its hash tag, and the core races hold.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::{BTreeSet, HashMap};

use common::{
    TicketSpec, assert_invariants, now, pool, published_event,
    purchase::{fresh_key, request},
    races::{
        GateAt, Setup, assert_answers_match_orders, engine, one_buyer_raced, race, same_key_raced,
        seed_000, seed_001, two_instances,
    },
    redis_servers::RedisCluster,
    sold,
};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use stampede::{
    error::AppError,
    sale::{Purchase, Strategy},
};
use uuid::Uuid;

fn on(cluster: &RedisCluster, strategy: Strategy) -> Setup {
    Setup {
        strategy,
        gate: GateAt::Cluster(cluster.nodes()),
    }
}

/// The five core races of `tests/strategies.rs` at once, each on a ticket
/// type of its own, behind one gate cluster.
#[sqlx::test]
async fn the_core_races_hold_behind_a_gate_on_a_cluster(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let cluster = RedisCluster::start().await;
    let setup = on(&cluster, Strategy::Batch);
    tokio::join!(
        seed_000(connect.clone(), setup.clone()),
        seed_001(connect.clone(), setup.clone()),
        same_key_raced(connect.clone(), setup.clone()),
        one_buyer_raced(connect.clone(), on(&cluster, Strategy::Naive)),
        two_instances(connect, setup),
    );
}

/// Ticket types whose keys sit on all three masters, and a burst over them
/// through two instances: for each type more buyers than tickets, one
/// buyer over the limit with fresh keys, and one key sent five times.
/// Nothing oversold, every ticket sold, the limit held, one order per key,
/// answers agree with the tables; and every master counted.
#[sqlx::test]
async fn a_burst_over_ticket_types_on_every_master(_: PgPoolOptions, connect: PgConnectOptions) {
    let cluster = RedisCluster::start().await;
    let setup = on(&cluster, Strategy::Batch);
    let pool = pool(connect.clone(), 32).await;
    let mut types = Vec::new();
    let mut masters = BTreeSet::new();
    for _ in 0..20 {
        let fixture = published_event(&pool, &vec![TicketSpec::new(8, 2, 2); 3]).await;
        for tt in fixture.ticket_type_ids {
            // Only the hash tag decides the slot.
            masters.insert(cluster.master_of(&format!("{{tt:{tt}}}")).await);
            types.push(tt);
        }
        if masters.len() == 3 {
            break;
        }
    }
    assert_eq!(masters.len(), 3, "ticket types on {masters:?} only");

    let one = engine(&pool, &setup);
    let two = engine(&common::pool(connect, 16).await, &setup);
    let (mut first, mut second) = (Vec::new(), Vec::new());
    for (n, &tt) in types.iter().enumerate() {
        let twin_key = fresh_key();
        let mut requests = Vec::new();
        for i in 0..30 {
            requests.push(request(tt, 1, &format!("fan{i}@example.org"), &fresh_key()));
        }
        for i in 0..6 {
            requests.push(request(
                tt,
                1 + i % 2,
                "Scalper+x@example.org",
                &fresh_key(),
            ));
        }
        for _ in 0..5 {
            requests.push(request(tt, 1, "twin@example.org", &twin_key));
        }
        for (i, request) in requests.into_iter().enumerate() {
            if (i + n) % 2 == 0 {
                first.push(request);
            } else {
                second.push(request);
            }
        }
    }
    let (first, second) = tokio::join!(race(&one, first), race(&two, second));
    let results: Vec<_> = first.into_iter().chain(second).collect();

    assert_invariants(&pool).await;
    for (request, result) in &results {
        match result {
            Ok(_)
            | Err(
                AppError::SoldOut | AppError::NotEnoughLeft { .. } | AppError::BuyerLimit { .. },
            ) => {}
            other => panic!("{}: {other:?}", request.email.as_str()),
        }
    }
    let created = results
        .iter()
        .filter(|(_, r)| matches!(r, Ok(Purchase::Created { .. })))
        .count();
    let mut by_type: HashMap<Uuid, Vec<_>> = HashMap::new();
    for (request, result) in results {
        let tt = request.ticket_type_id.get();
        by_type.entry(tt).or_default().push((request, result));
    }
    for &tt in &types {
        assert_eq!(sold(&pool, tt).await, 8, "ticket type {tt} not sold out");
        let of_type = &by_type[&tt];
        assert_answers_match_orders(&pool, tt, of_type).await;
        let twins: BTreeSet<_> = of_type
            .iter()
            .filter(|(request, _)| request.email.as_str() == "twin@example.org")
            .filter_map(|(_, result)| result.as_ref().ok().map(|p| p.order().id))
            .collect();
        assert!(twins.len() <= 1, "one key, {} orders", twins.len());
    }
    let admitted = one.gate().unwrap().admitted() + two.gate().unwrap().admitted();
    assert!(admitted > 0, "nothing went through the gate");
    let keys = cluster.keys_per_master().await;
    assert!(keys.iter().all(|&n| n > 0), "keys per master: {keys:?}");
    // Created answers: one per order (the twins' others replay).
    assert!(created <= 8 * types.len(), "{created} created");
}

/// Stock returned behind a gate on a cluster: the rebuild that waits for
/// quiet (its two reads, its script, and the settle after each commit) runs
/// on the ticket type's master, and the ticket is sold again through the
/// gate, not around it.
#[sqlx::test]
async fn returned_stock_is_sold_again_through_a_gate_on_a_cluster(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let cluster = RedisCluster::start().await;
    let pool = pool(connect, 8).await;
    let fixture = published_event(&pool, &[TicketSpec::new(1, 1, 1)]).await;
    let tt = fixture.ticket_type_id();
    let sales = engine(&pool, &on(&cluster, Strategy::Batch));
    sales
        .purchase(now(), &request(tt, 1, "first@example.org", &fresh_key()))
        .await
        .unwrap();
    sqlx::query("UPDATE ticket_types SET capacity = 2, remaining = 1 WHERE id = $1")
        .bind(tt)
        .execute(&pool)
        .await
        .unwrap();
    let mut answer = Err(AppError::Overloaded);
    for i in 0..100 {
        let later = request(tt, 1, &format!("later{i}@example.org"), &fresh_key());
        answer = sales.purchase(now(), &later).await;
        if answer.is_ok() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        matches!(answer, Ok(Purchase::Created { .. })),
        "the returned ticket stayed unsold: {answer:?}"
    );
    assert_eq!(sales.gate().unwrap().admitted(), 2);
    assert_eq!(sold(&pool, tt).await, 2);
    assert_invariants(&pool).await;
}

/// A master of the gate's cluster killed in the middle of a sale (issue
/// 37): the ticket types it served fall back to Postgres, the others keep
/// the gate, and every type sells exactly its stock; every answer a sale or
/// sold out, answers agree with the tables.
#[sqlx::test]
async fn a_master_killed_mid_sale_loses_nothing_and_oversells_nothing(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let mut cluster = RedisCluster::start().await;
    let setup = on(&cluster, Strategy::Batch);
    let pool = pool(connect.clone(), 32).await;
    let mut types = Vec::new();
    let mut masters = BTreeSet::new();
    for _ in 0..20 {
        let fixture = published_event(&pool, &[TicketSpec::new(40, 1, 1)]).await;
        let tt = fixture.ticket_type_id();
        let master = cluster.master_of(&format!("{{tt:{tt}}}")).await;
        if masters.insert(master) {
            types.push((tt, master));
        }
        if masters.len() == 3 {
            break;
        }
    }
    assert_eq!(masters.len(), 3, "ticket types on {masters:?} only");
    let sales = engine(&pool, &setup);
    let wave = |from: usize, to: usize| {
        types
            .iter()
            .flat_map(|&(tt, _)| {
                (from..to)
                    .map(move |i| request(tt, 1, &format!("fan{i}@example.org"), &fresh_key()))
            })
            .collect::<Vec<_>>()
    };

    let before = race(&sales, wave(0, 15)).await;
    let killed = types
        .iter()
        .find(|(_, m)| *m == 0)
        .map(|(tt, _)| *tt)
        .unwrap();
    // One wave races the kill; the next comes with the master gone.
    let (during, ()) = tokio::join!(race(&sales, wave(15, 30)), async {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        cluster.masters[0].stop();
    });
    let after = race(&sales, wave(30, 60)).await;
    let results: Vec<_> = before.into_iter().chain(during).chain(after).collect();

    assert_invariants(&pool).await;
    for (request, result) in &results {
        match result {
            Ok(_) | Err(AppError::SoldOut | AppError::NotEnoughLeft { .. }) => {}
            other => panic!("{}: {other:?}", request.email.as_str()),
        }
    }
    let admitted = sales.gate().unwrap().admitted();
    let mut by_type: HashMap<Uuid, Vec<_>> = HashMap::new();
    for (request, result) in results {
        let tt = request.ticket_type_id.get();
        by_type.entry(tt).or_default().push((request, result));
    }
    for &(tt, _) in &types {
        assert_eq!(sold(&pool, tt).await, 40, "ticket type {tt} not sold out");
        assert_answers_match_orders(&pool, tt, &by_type[&tt]).await;
    }
    // The killed master's type sold its last tickets from Postgres alone.
    assert!(admitted < 120, "the gate admitted all {admitted}");
    eprintln!("the killed master served {killed}; the gate admitted {admitted} of 120");
}
