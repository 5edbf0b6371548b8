//! Money given back: an order cancelled by its buyer, an event cancelled
//! by its organizer with fifty paid orders while Stripe fails now and then,
//! and the app killed between Stripe's refund and our record of it.

use std::time::Duration;

use futures::StreamExt as _;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use stampede::domain::{EventId, OrganizerId};

use super::shop::{PaidShop, assert_money};

/// Refunds of `intent` at Stripe.
async fn refunds_at_stripe(shop: &PaidShop, intent: &str) -> usize {
    let list = shop
        .stripe
        .get(&format!("/v1/refunds?payment_intent={intent}"))
        .await;
    list["data"].as_array().map_or(0, Vec::len)
}

#[sqlx::test]
async fn a_buyers_cancel_of_a_paid_order_refunds_it_in_full_once(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let shop = PaidShop::open(&connect, 5, true).await;
    let (order, intent) = shop.buy_and_pay("changed-mind@example.org").await;
    shop.wait_confirmed(order.id, "paid").await;
    let body = crate::common::form_body(&[("s", &order.secret)]);
    let cancel = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .post(shop.server.url(&format!("/orders/{}/cancel", order.id)))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("cookie", crate::common::csrf_cookie())
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(cancel.status(), 303);
    let refunded = format!(
        "SELECT refund = 'done' FROM payments WHERE order_id = '{}'",
        order.id
    );
    shop.wait_until("the refund", &refunded).await;
    assert_eq!(refunds_at_stripe(&shop, &intent).await, 1);
    assert_eq!(shop.messages(order.id, "order.refunded").await, 1);
    let page = shop
        .get(&format!("/orders/{}?s={}", order.id, order.secret))
        .await;
    assert!(page.text().await.unwrap().contains("refunded in full"));
    assert_money(&shop.pool).await;
}

#[sqlx::test]
async fn an_event_cancel_refunds_fifty_paid_orders_once_each_while_stripe_fails_now_and_then(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let shop = PaidShop::open(&connect, 50, true).await;
    let paid: Vec<(uuid::Uuid, String)> = futures::stream::iter(0..50)
        .map(|i| {
            let shop = &shop;
            async move {
                let (order, intent) = shop.buy_and_pay(&format!("fan{i}@example.org")).await;
                (order.id, intent)
            }
        })
        .buffer_unordered(5)
        .collect()
        .await;
    shop.wait_until(
        "fifty paid orders",
        "SELECT count(*) = 50 FROM orders WHERE status = 'confirmed'",
    )
    .await;
    // Every third of the first thirty refunds fails at Stripe.
    shop.proxy.fail_every_refund(3, 30);
    stampede::sale::cancel_event(
        &shop.pool,
        OrganizerId::from(shop.fixture.organizer_id),
        EventId::from(shop.fixture.event_id),
    )
    .await
    .unwrap();
    shop.wait_within(
        Duration::from_secs(60),
        "fifty refunds",
        "SELECT count(*) = 50 FROM payments WHERE refund = 'done'",
    )
    .await;
    assert!(
        shop.proxy.calls("POST /v1/refunds") >= 60,
        "the failed refunds were tried again"
    );
    for (order, intent) in &paid {
        assert_eq!(refunds_at_stripe(&shop, intent).await, 1, "{order}");
        assert_eq!(shop.messages(*order, "order.refunded").await, 1);
    }
    let reasons: Vec<String> = sqlx::query_scalar("SELECT DISTINCT refund_reason FROM payments")
        .fetch_all(&shop.pool)
        .await
        .unwrap();
    assert_eq!(reasons, ["event_cancelled"]);
    assert_money(&shop.pool).await;
}

#[sqlx::test]
async fn an_app_killed_between_stripes_refund_and_our_record_refunds_once(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let mut shop = PaidShop::open(&connect, 5, true).await;
    let (order, intent) = shop.buy_and_pay("crash@example.org").await;
    shop.wait_confirmed(order.id, "paid").await;
    let made = shop.proxy.swallow_next_refund();
    stampede::sale::cancel_event(
        &shop.pool,
        OrganizerId::from(shop.fixture.organizer_id),
        EventId::from(shop.fixture.event_id),
    )
    .await
    .unwrap();
    tokio::time::timeout(Duration::from_secs(20), made)
        .await
        .expect("the refund reaches Stripe")
        .unwrap();
    // Stripe has refunded; the app dies before it records it.
    shop.restart().await;
    // The dead instance's claim runs out (ten minutes; here at once).
    sqlx::query("UPDATE payments SET refund_next_at = now() WHERE refund = 'due'")
        .execute(&shop.pool)
        .await
        .unwrap();
    let refunded = format!(
        "SELECT refund = 'done' FROM payments WHERE order_id = '{}'",
        order.id
    );
    shop.wait_until("the refund recorded after the restart", &refunded)
        .await;
    assert_eq!(refunds_at_stripe(&shop, &intent).await, 1);
    assert_eq!(shop.messages(order.id, "order.refunded").await, 1);
    assert_money(&shop.pool).await;
}
