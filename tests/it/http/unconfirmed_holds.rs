//! Issue 34, finding 4: holds let one client take the whole stock without a
//! mailbox. A hold for a mailbox not yet proven counts against the client
//! address that made it (at most `HoldRules::per_address` unconfirmed
//! tickets per event), and lasts only the first window; a proven mailbox
//! (a held order of its buyer confirmed) gets the event's full hold. Read
//! from the tables, under real concurrency, through both sale paths.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{net::IpAddr, time::Duration};

use futures::future::join_all;
use reqwest::StatusCode;
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use stampede::{
    domain::{ClientKey, ConfirmKey, OrderStatus},
    error::AppError,
    sale::{self, EngineSettings, HoldRules, Order, Sales, Strategy},
};
use time::{Duration as Span, OffsetDateTime};
use uuid::Uuid;

use crate::{
    common::{
        TicketSpec, assert_invariants, holds::hold_for, now, pool, published_event,
        purchase::purchase_request,
    },
    http::support::{app_with_event, buy_on_page, order_json, post_json},
};

const TWO_HOURS: i32 = 2 * 3600;

fn client(ip: &str) -> Option<ClientKey> {
    Some(ClientKey::of(ip.parse::<IpAddr>().unwrap()))
}

fn sales(pool: &PgPool, strategy: Strategy, key: &ConfirmKey) -> Sales {
    let settings = EngineSettings {
        holds: HoldRules {
            per_address: 10,
            unproven: Duration::from_secs(600),
        },
        ..EngineSettings::default()
    };
    Sales::new(pool.clone(), strategy, settings).with_confirm_key(key.clone())
}

/// The hold ends at `at` (Postgres keeps microseconds).
fn assert_ends(order: &Order, at: OffsetDateTime) {
    let off = order.hold_expires_at.expect("held") - at;
    assert!(off.abs() < Span::microseconds(1), "{off}");
}

/// Unconfirmed tickets held for `address` in the event, from the table.
async fn held_by(pool: &PgPool, address: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT coalesce(sum(quantity), 0)::int8 FROM orders
         WHERE status = 'held' AND held_by_address = $1",
    )
    .bind(address)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// 20 invented buyers from one address, 2 tickets each, all at once, across
/// two ticket types of a 2-hour-hold event: 5 orders (10 tickets) are held,
/// each for the 10-minute first window; 15 are refused; another address
/// still buys; a confirmation frees its tickets from the address's count.
async fn one_address_holds_at_most_ten(connect: PgConnectOptions, strategy: Strategy) {
    let pool = pool(connect, 20).await;
    let fixture = published_event(
        &pool,
        &[TicketSpec::new(40, 4, 4), TicketSpec::new(40, 4, 4)],
    )
    .await;
    hold_for(&pool, fixture.event_id, TWO_HOURS).await;
    let key = ConfirmKey::random();
    let sales = sales(&pool, strategy, &key);
    let t0 = now();

    let results = join_all((0..20).map(|i| {
        let sales = sales.clone();
        let mut request = purchase_request(
            fixture.ticket_type_ids[i % 2],
            2,
            &format!("bot{i}@example.org"),
        );
        request.client = client("192.0.2.7");
        async move { sales.purchase(t0, &request).await }
    }))
    .await;
    let mut held = Vec::new();
    for result in results {
        match result {
            Ok(purchase) => held.push(purchase.order().clone()),
            Err(AppError::UnconfirmedHoldLimit { max: 10 }) => {}
            Err(other) => panic!("{strategy}: {other:?}"),
        }
    }
    assert_eq!(held.len(), 5, "{strategy}");
    assert_eq!(held_by(&pool, "192.0.2.7").await, 10, "{strategy}");
    for order in &held {
        assert_eq!(order.status, OrderStatus::Held);
        assert_ends(order, t0 + Span::seconds(600));
    }

    // Another address is not affected.
    let mut other = purchase_request(fixture.ticket_type_id(), 2, "fan@example.org");
    other.client = client("2001:db8:1:2::1");
    sales.purchase(t0, &other).await.unwrap();
    assert_eq!(held_by(&pool, "2001:db8:1:2::").await, 2);

    // A confirmed hold no longer counts: the address may hold 2 more.
    let first = held[0].id;
    sale::confirm(&pool, t0, first, &key.token(first))
        .await
        .unwrap();
    assert_eq!(held_by(&pool, "192.0.2.7").await, 8);
    let mut again = purchase_request(fixture.ticket_type_id(), 2, "bot-again@example.org");
    again.client = client("192.0.2.7");
    sales.purchase(t0, &again).await.unwrap();
    let mut over = purchase_request(fixture.ticket_type_id(), 1, "bot-over@example.org");
    over.client = client("192.0.2.7");
    assert!(matches!(
        sales.purchase(t0, &over).await,
        Err(AppError::UnconfirmedHoldLimit { max: 10 })
    ));
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn one_address_holds_at_most_ten_unconfirmed_tickets_through_the_engine(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    one_address_holds_at_most_ten(connect, Strategy::Batch).await;
}

#[sqlx::test]
async fn one_address_holds_at_most_ten_unconfirmed_tickets_one_transaction_each(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    one_address_holds_at_most_ten(connect, Strategy::Naive).await;
}

/// Once a mailbox is proven, its buyer's holds last the event's full hold
/// and count against no address; an unproven one's end after the window.
#[sqlx::test]
async fn a_proven_mailbox_gets_the_full_hold_and_no_address_count(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(40, 4, 8)]).await;
    let tt = fixture.ticket_type_id();
    hold_for(&pool, fixture.event_id, TWO_HOURS).await;
    let key = ConfirmKey::random();
    let sales = sales(&pool, Strategy::Batch, &key);
    let t0 = now();
    let mut request = purchase_request(tt, 1, "ada@example.org");
    request.client = client("192.0.2.9");
    let first = sales.purchase(t0, &request).await.unwrap().order().clone();
    assert_ends(&first, t0 + Span::seconds(600));
    sale::confirm(&pool, t0, first.id, &key.token(first.id))
        .await
        .unwrap();

    // The same mailbox, spelled with a tag: one buyer key, proven.
    let mut next = purchase_request(tt, 4, "Ada+again@example.org");
    next.client = client("192.0.2.9");
    let order = sales.purchase(t0, &next).await.unwrap().order().clone();
    assert_ends(&order, t0 + Span::seconds(i64::from(TWO_HOURS)));
    assert_eq!(held_by(&pool, "192.0.2.9").await, 0);
}

/// Over HTTP from loopback: the API answers 429 `unconfirmed_hold_limit`
/// naming `quantity`; the form comes back filled in with the message;
/// nothing is written for either.
#[sqlx::test]
async fn over_http_the_eleventh_unconfirmed_ticket_is_a_429_that_writes_nothing(pool: PgPool) {
    let (app, fixture) = app_with_event(&pool, &[TicketSpec::new(40, 10, 10)]).await;
    hold_for(&pool, fixture.event_id, TWO_HOURS).await;
    let tt = fixture.ticket_type_id();
    let resp = post_json(
        &app,
        "/api/v1/orders",
        &order_json(tt, 10, "one@example.org", &Uuid::new_v4().to_string()),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let orders_before: i64 = sqlx::query_scalar("SELECT count(*) FROM orders")
        .fetch_one(&pool)
        .await
        .unwrap();

    let resp = post_json(
        &app,
        "/api/v1/orders",
        &order_json(tt, 1, "two@example.org", &Uuid::new_v4().to_string()),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unconfirmed_hold_limit", "{body}");
    assert_eq!(body["error"]["field"], "quantity", "{body}");

    let resp = buy_on_page(
        &app,
        &fixture,
        "1",
        "three@example.org",
        "three-key-0000001",
    )
    .await;
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    let page = resp.text().await.unwrap();
    assert!(
        page.contains("unconfirmed tickets for this event"),
        "{page}"
    );
    assert!(
        page.contains("three@example.org"),
        "the form comes back filled in"
    );

    let orders_after: i64 = sqlx::query_scalar("SELECT count(*) FROM orders")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(orders_after, orders_before);
    assert_eq!(held_by(&pool, "127.0.0.1").await, 10);
}
