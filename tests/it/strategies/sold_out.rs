//! The engine's sold-out flags: cleared by a cancellation elsewhere
//! (LISTEN/NOTIFY), refusals that read nothing, and the buyer's rate limit
//! not spent on a known sell-out.

use super::*;

/// Sold out, an engine refuses from its flag; a cancellation made through
/// another instance clears the flag (LISTEN/NOTIFY), and the ticket sells
/// again. A committed purchase retried after the sell-out still replays.
#[sqlx::test]
async fn a_cancellation_elsewhere_clears_the_sold_out_flag(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = rush(connect.clone(), TicketSpec::new(1, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    // Flags that never lapse by themselves: only the notification clears them.
    let settings = EngineSettings {
        sold_out_lifetime: Duration::from_secs(3600),
        ..EngineSettings::default()
    };
    let sales = Sales::new(pool.clone(), Strategy::Batch, settings);
    let key = fresh_key();
    let bought = sales
        .purchase(now(), &request(tt, 1, "ada@example.org", &key))
        .await
        .unwrap();
    let refused = sales
        .purchase(now(), &request(tt, 1, "bob@example.org", &fresh_key()))
        .await;
    assert!(matches!(refused, Err(AppError::SoldOut)), "{refused:?}");
    // The flag is set now; idempotency still holds behind it.
    let replayed = sales
        .purchase(now(), &request(tt, 1, "ada@example.org", &key))
        .await
        .unwrap();
    assert_eq!(replayed, Purchase::Replayed(bought.order().clone()));

    // Another instance: its own pool, no shared memory.
    let elsewhere = common::pool(connect, 2).await;
    sale::cancel(&elsewhere, now(), bought.order().id, bought.cancel_secret())
        .await
        .unwrap();

    let mut sold_again = None;
    for _ in 0..1000 {
        match sales
            .purchase(now(), &request(tt, 1, "cy@example.org", &fresh_key()))
            .await
        {
            Ok(purchase) => {
                sold_again = Some(purchase);
                break;
            }
            Err(AppError::SoldOut) => tokio::time::sleep(Duration::from_millis(10)).await,
            Err(err) => panic!("{err:?}"),
        }
    }
    assert!(sold_again.is_some(), "the flag was never cleared");
    assert_invariants(&pool).await;
    assert_eq!(sold(&pool, tt).await, 1);
}

/// Sold out, an engine learns the keys of the type's orders once and then
/// refuses other buyers without reading Postgres (here the orders table is
/// locked: any read would wait), while a retry of a purchase committed
/// through another instance still gets its order back.
#[sqlx::test]
async fn sold_out_refusals_read_nothing_once_the_keys_are_known(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, fixture) = rush(connect.clone(), TicketSpec::new(1, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let settings = EngineSettings {
        sold_out_lifetime: Duration::from_secs(3600),
        ..EngineSettings::default()
    };
    let seller = Sales::new(pool.clone(), Strategy::Batch, settings);
    let other = Sales::new(common::pool(connect, 4).await, Strategy::Batch, settings);
    let key = fresh_key();
    let bought = seller
        .purchase(now(), &request(tt, 1, "ada@example.org", &key))
        .await
        .unwrap();
    let refused = other
        .purchase(now(), &request(tt, 1, "bob@example.org", &fresh_key()))
        .await;
    assert!(matches!(refused, Err(AppError::SoldOut)), "{refused:?}");
    let mut known = false;
    for _ in 0..500 {
        known = other.refuses_without_reading(tt.into());
        if known {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(known, "the flag never learned the type's keys");

    let blocker = lock_table(&pool, "orders").await;
    let refused = tokio::time::timeout(
        Duration::from_secs(5),
        other.purchase(now(), &request(tt, 1, "cy@example.org", &fresh_key())),
    )
    .await;
    // Released before any assertion: a failing test then ends, rather than
    // leave a purchase waiting on the lock while the test database drops.
    blocker.rollback().await.unwrap();
    let refused = refused.expect("the refusal waited for Postgres");
    assert!(matches!(refused, Err(AppError::SoldOut)), "{refused:?}");

    let replayed = other
        .purchase(now(), &request(tt, 1, "ada@example.org", &key))
        .await
        .unwrap();
    assert_eq!(replayed, Purchase::Replayed(bought.order().clone()));
    assert_invariants(&pool).await;
    assert_eq!(sold(&pool, tt).await, 1);
    assert_eq!(order_count(&pool).await, 1);
}

/// The buyer's rate limit (`Sales::purchase_limited`) is asked before any
/// read or write, and its refusal writes nothing; a refusal known at once
/// (the type sold out, the key no order's) does not ask it, so hammering a
/// sold-out type spends none of the buyer's budget. A possible retry of a
/// committed purchase still asks it.
#[sqlx::test]
async fn the_rate_limit_is_asked_of_every_purchase_but_a_known_sell_out(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    use std::sync::atomic::{AtomicUsize, Ordering};

    let (pool, fixture) = rush(connect, TicketSpec::new(1, 1, 1)).await;
    let tt = fixture.ticket_type_id();
    let settings = EngineSettings {
        sold_out_lifetime: Duration::from_secs(3600),
        ..EngineSettings::default()
    };
    let sales = Sales::new(pool.clone(), Strategy::Batch, settings);
    let asked = AtomicUsize::new(0);
    let limited = |_: &sale::PurchaseRequest| {
        asked.fetch_add(1, Ordering::Relaxed);
        Err(AppError::TooManyRequests {
            retry_after_secs: 7,
        })
    };
    let allowed = |_: &sale::PurchaseRequest| {
        asked.fetch_add(1, Ordering::Relaxed);
        Ok(())
    };

    let key = fresh_key();
    let refused = sales
        .purchase_limited(now(), &request(tt, 1, "ada@example.org", &key), limited)
        .await;
    assert!(
        matches!(
            refused,
            Err(AppError::TooManyRequests {
                retry_after_secs: 7
            })
        ),
        "{refused:?}"
    );
    assert_eq!(asked.load(Ordering::Relaxed), 1);
    assert_eq!(order_count(&pool).await, 0);
    assert_eq!(remaining(&pool, tt).await, 1);

    let bought = sales
        .purchase_limited(now(), &request(tt, 1, "ada@example.org", &key), allowed)
        .await
        .unwrap();
    assert_eq!(asked.load(Ordering::Relaxed), 2);
    let mut known = false;
    for _ in 0..500 {
        known = sales.refuses_without_reading(tt.into());
        if known {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(known, "the flag never learned the type's keys");

    for i in 0..5 {
        let refused = sales
            .purchase_limited(
                now(),
                &request(tt, 1, &format!("fan{i}@example.org"), &fresh_key()),
                limited,
            )
            .await;
        assert!(matches!(refused, Err(AppError::SoldOut)), "{refused:?}");
    }
    assert_eq!(
        asked.load(Ordering::Relaxed),
        2,
        "a sold-out refusal asked the limit"
    );

    let replayed = sales
        .purchase_limited(now(), &request(tt, 1, "ada@example.org", &key), allowed)
        .await
        .unwrap();
    assert_eq!(replayed, Purchase::Replayed(bought.order().clone()));
    assert_eq!(
        asked.load(Ordering::Relaxed),
        3,
        "a possible retry skipped the limit"
    );
    assert_eq!(order_count(&pool).await, 1);
    assert_invariants(&pool).await;
}
