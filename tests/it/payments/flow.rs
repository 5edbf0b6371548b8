//! A paid ticket from the buyer's side, and Stripe's word in every order
//! and number: paid once, confirmed once, never without the money.

use sqlx::postgres::PgConnectOptions;
use sqlx::{PgPool, postgres::PgPoolOptions};
use stampede::payments::stripe::WebhookKey;

use super::shop::{PaidShop, WEBHOOK_SECRET, assert_money};

/// A signed Stripe event about `intent`, as Stripe (and localstripe) send.
fn signed_event(kind: &str, intent: &str, status: &str, amount: i64) -> (String, String) {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let body = serde_json::json!({
        "id": format!("evt_{}", uuid::Uuid::new_v4().simple()),
        "object": "event",
        "type": kind,
        "created": now,
        "data": { "object": {
            "id": intent, "object": "payment_intent", "status": status,
            "amount": amount, "currency": "eur", "metadata": {},
        }},
    })
    .to_string();
    let key = WebhookKey::new(WEBHOOK_SECRET).unwrap();
    (key.signature_header(now, body.as_bytes()), body)
}

async fn deliver(shop: &PaidShop, signature: &str, body: &str) -> u16 {
    reqwest::Client::new()
        .post(shop.server.url("/payments/stripe/webhook"))
        .header("stripe-signature", signature)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[sqlx::test]
async fn a_paid_ticket_is_held_paid_once_and_confirmed_by_stripes_webhook(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let shop = PaidShop::open(&connect, 10, true).await;
    let order = shop.buy("payer@example.org").await;
    assert_eq!(shop.order_status(order.id).await, "held");
    // The order page asks for the money; the pay page shows it.
    let page = shop
        .get(&format!("/orders/{}?s={}", order.id, order.secret))
        .await;
    let html = page.text().await.unwrap();
    assert!(
        html.contains("Pay now") && html.contains("25.00 EUR"),
        "{html}"
    );
    // Opened twice at once (a double click), then again (a reload): one
    // intent at Stripe.
    let (intent, twin) = tokio::join!(shop.open_payment(&order), shop.open_payment(&order));
    assert_eq!(intent, twin);
    assert_eq!(shop.open_payment(&order).await, intent);
    assert_eq!(shop.proxy.calls("POST /v1/payment_intents"), 1);
    // The pay page: the amount, and a policy that lets Stripe.js in.
    let pay = shop
        .get(&format!("/orders/{}/pay?s={}", order.id, order.secret))
        .await;
    let policy = pay.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        policy.contains(&format!("script-src 'self' {}", shop.stripe.base)),
        "{policy}"
    );
    let html = pay.text().await.unwrap();
    assert!(
        html.contains("Pay 25.00 EUR") && html.contains("js.stripe.com/v3/"),
        "{html}"
    );
    // Without the order's secret there is no pay page.
    let stranger = shop.get(&format!("/orders/{}/pay", order.id)).await;
    assert_eq!(stranger.status(), 403);
    // No mailbox link confirms a paid order: only the payment.
    assert_eq!(shop.order_status(order.id).await, "held");

    shop.stripe.pay(&intent).await;
    shop.wait_confirmed(order.id, "the webhook confirms the order")
        .await;
    let tickets: i64 = sqlx::query_scalar("SELECT count(*) FROM tickets WHERE order_id = $1")
        .bind(order.id)
        .fetch_one(&shop.pool)
        .await
        .unwrap();
    assert_eq!(tickets, 1);
    assert_eq!(shop.messages(order.id, "order.paid").await, 1);
    assert_eq!(shop.messages(order.id, "order.confirmed").await, 1);
    // Back from Stripe.js: the order page says paid and shows the ticket.
    let back = shop
        .get(&format!("/orders/{}/paid?s={}", order.id, order.secret))
        .await;
    assert_eq!(back.status(), 303);
    let page = shop
        .get(&format!("/orders/{}?s={}", order.id, order.secret))
        .await;
    let html = page.text().await.unwrap();
    assert!(
        html.contains("Payment") && html.contains(">paid<"),
        "{html}"
    );
    assert!(html.contains("ticket-code"), "{html}");
    // The pay page of a paid order leads to the order.
    let again = shop
        .get(&format!("/orders/{}/pay?s={}", order.id, order.secret))
        .await;
    assert_eq!(again.status(), 303);
    assert_money(&shop.pool).await;
}

#[sqlx::test]
async fn duplicate_late_and_out_of_order_webhooks_change_nothing_twice(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    // No webhook from localstripe: this test delivers Stripe's word itself.
    let shop = PaidShop::open(&connect, 10, false).await;
    let order = shop.buy("twice@example.org").await;
    let intent = shop.open_payment(&order).await;
    // A failed attempt first, then the success twice, then the failure
    // again (out of order): one confirmation, one `order.paid`.
    let (sig, failed) = signed_event(
        "payment_intent.payment_failed",
        &intent,
        "requires_payment_method",
        2500,
    );
    assert_eq!(deliver(&shop, &sig, &failed).await, 200);
    assert_eq!(shop.order_status(order.id).await, "held");
    let (sig, paid) = signed_event("payment_intent.succeeded", &intent, "succeeded", 2500);
    for _ in 0..3 {
        assert_eq!(deliver(&shop, &sig, &paid).await, 200);
    }
    let (sig, failed) = signed_event(
        "payment_intent.payment_failed",
        &intent,
        "requires_payment_method",
        2500,
    );
    assert_eq!(deliver(&shop, &sig, &failed).await, 200);
    assert_eq!(shop.order_status(order.id).await, "confirmed");
    assert_eq!(shop.messages(order.id, "order.paid").await, 1);
    // An event type we do not handle: 200, ignored.
    let (sig, other) = signed_event("charge.dispute.created", &intent, "succeeded", 2500);
    assert_eq!(deliver(&shop, &sig, &other).await, 200);
    assert_money(&shop.pool).await;
}

#[sqlx::test]
async fn a_webhook_with_a_bad_signature_is_refused_and_writes_nothing(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let shop = PaidShop::open(&connect, 10, false).await;
    let order = shop.buy("forger@example.org").await;
    let intent = shop.open_payment(&order).await;
    let (sig, paid) = signed_event("payment_intent.succeeded", &intent, "succeeded", 2500);
    // Another secret, a changed body, an old timestamp, none at all.
    let wrong = WebhookKey::new("whsec_not_the_secret").unwrap();
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let forged = wrong.signature_header(now, paid.as_bytes());
    let tampered = paid.replace("2500", "1");
    let key = WebhookKey::new(WEBHOOK_SECRET).unwrap();
    let stale = key.signature_header(now - 3600, paid.as_bytes());
    for (signature, body) in [
        (forged.as_str(), paid.as_str()),
        (sig.as_str(), tampered.as_str()),
        (stale.as_str(), paid.as_str()),
        ("", paid.as_str()),
    ] {
        assert_eq!(deliver(&shop, signature, body).await, 400, "{signature}");
    }
    assert_eq!(shop.order_status(order.id).await, "held");
    let outbox: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox WHERE kind = 'order.paid'")
        .fetch_one(&shop.pool)
        .await
        .unwrap();
    assert_eq!(outbox, 0);
    let status: String = sqlx::query_scalar("SELECT status FROM payments WHERE order_id = $1")
        .bind(order.id)
        .fetch_one(&shop.pool)
        .await
        .unwrap();
    assert_eq!(status, "pending");
}

#[sqlx::test]
async fn a_lost_webhook_is_recovered_by_the_reconciler(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    // Stripe's webhook never comes; the buyer closes the tab after paying.
    let shop = PaidShop::open(&connect, 10, false).await;
    let (order, _) = shop.buy_and_pay("lost@example.org").await;
    shop.wait_confirmed(order.id, "the reconciler confirms the paid order")
        .await;
    assert_eq!(shop.messages(order.id, "order.paid").await, 1);
    assert!(shop.proxy.calls("GET /v1/payment_intents/") >= 1);
    assert_money(&shop.pool).await;
}

/// Expire the order's hold now, as the sweeper does when its time is up.
async fn expire(pool: &PgPool, order: uuid::Uuid) {
    sqlx::query("UPDATE orders SET hold_expires_at = now() - interval '1 second' WHERE id = $1")
        .bind(order)
        .execute(pool)
        .await
        .unwrap();
    let swept = crate::common::holds::sweep(pool, time::OffsetDateTime::now_utc()).await;
    assert_eq!(swept, 1);
}

#[sqlx::test]
async fn a_late_payment_takes_the_stock_again_if_it_is_left(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let shop = PaidShop::open(&connect, 3, true).await;
    let order = shop.buy("late@example.org").await;
    let intent = shop.open_payment(&order).await;
    expire(&shop.pool, order.id).await;
    assert_eq!(shop.order_status(order.id).await, "cancelled");
    shop.stripe.pay(&intent).await;
    shop.wait_confirmed(order.id, "the late payment confirms the order")
        .await;
    let remaining: i32 = sqlx::query_scalar("SELECT remaining FROM ticket_types WHERE id = $1")
        .bind(shop.ticket_type())
        .fetch_one(&shop.pool)
        .await
        .unwrap();
    assert_eq!(remaining, 2);
    assert_money(&shop.pool).await;
}

#[sqlx::test]
async fn a_late_payment_without_stock_is_refunded_in_full_and_mailed(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let shop = PaidShop::open(&connect, 1, true).await;
    let late = shop.buy("late@example.org").await;
    let intent = shop.open_payment(&late).await;
    expire(&shop.pool, late.id).await;
    // Meanwhile the ticket went to someone else, who paid.
    let (other, _) = shop.buy_and_pay("quick@example.org").await;
    shop.wait_confirmed(other.id, "the other buyer's order is confirmed")
        .await;
    shop.stripe.pay(&intent).await;
    let refunded = format!(
        "SELECT refund = 'done' FROM payments WHERE order_id = '{}'",
        late.id
    );
    shop.wait_until("the late payment is refunded", &refunded)
        .await;
    assert_eq!(shop.order_status(late.id).await, "cancelled");
    assert_eq!(shop.messages(late.id, "order.refunded").await, 1);
    let reason: String =
        sqlx::query_scalar("SELECT refund_reason FROM payments WHERE order_id = $1")
            .bind(late.id)
            .fetch_one(&shop.pool)
            .await
            .unwrap();
    assert_eq!(reason, "late_sold_out");
    // At Stripe: refunded once, in full.
    let pi = shop
        .stripe
        .get(&format!("/v1/payment_intents/{intent}"))
        .await;
    let charge = &pi["latest_charge"];
    assert_eq!(charge["amount_refunded"], 2500, "{pi}");
    // The buyer is told why, by mail.
    let refund = &shop
        .mails
        .wait_for_mail(std::time::Duration::from_secs(20), |m| {
            m.header("Subject").as_deref() == Some("Your payment was refunded")
        })
        .await;
    assert!(
        refund.data.contains("25.00 EUR") && refund.data.contains("tickets had gone"),
        "{}",
        refund.data
    );
    assert_money(&shop.pool).await;
}

#[sqlx::test]
async fn zero_and_three_decimal_currencies_are_charged_in_their_own_minor_units(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let shop = PaidShop::open(&connect, 10, true).await;
    for (currency, minor, shown) in [("JPY", 2500, "2500 JPY"), ("KWD", 25_500, "25.500 KWD")] {
        sqlx::query("UPDATE ticket_types SET currency = $2, price_minor = $3 WHERE id = $1")
            .bind(shop.ticket_type())
            .bind(currency)
            .bind(minor)
            .execute(&shop.pool)
            .await
            .unwrap();
        let order = shop.buy(&format!("{currency}@example.org")).await;
        let pay = shop
            .get(&format!("/orders/{}/pay?s={}", order.id, order.secret))
            .await;
        let html = pay.text().await.unwrap();
        assert!(html.contains(&format!("Pay {shown}")), "{html}");
        let intent = shop.open_payment(&order).await;
        let at_stripe = shop
            .stripe
            .get(&format!("/v1/payment_intents/{intent}"))
            .await;
        assert_eq!(at_stripe["amount"], minor);
        assert_eq!(at_stripe["currency"], currency.to_lowercase());
        shop.stripe.pay(&intent).await;
        shop.wait_confirmed(order.id, "paid").await;
    }
    assert_money(&shop.pool).await;
}

#[sqlx::test]
async fn the_api_answers_a_held_paid_order_with_its_pay_page(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let shop = PaidShop::open(&connect, 10, true).await;
    let order: serde_json::Value = reqwest::Client::new()
        .post(shop.server.url("/api/v1/orders"))
        .json(&serde_json::json!({
            "ticket_type_id": shop.ticket_type(),
            "quantity": 1,
            "email": "script@example.org",
            "idempotency_key": uuid::Uuid::new_v4().to_string(),
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(order["status"], "held", "{order}");
    let pay_url = order["pay_url"].as_str().expect("a pay_url");
    let page = shop.get(pay_url).await;
    assert_eq!(page.status(), 200);
    assert!(
        page.text()
            .await
            .unwrap()
            .contains("data-client-secret=\"pi_")
    );
}

#[sqlx::test]
async fn the_intent_of_an_order_that_ended_unpaid_is_cancelled_at_stripe(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let shop = PaidShop::open(&connect, 3, true).await;
    let order = shop.buy("gone@example.org").await;
    let intent = shop.open_payment(&order).await;
    expire(&shop.pool, order.id).await;
    let closed = format!(
        "SELECT intent_closed_at IS NOT NULL FROM payments WHERE order_id = '{}'",
        order.id
    );
    shop.wait_until("the unpaid intent is cancelled", &closed)
        .await;
    let at_stripe = shop
        .stripe
        .get(&format!("/v1/payment_intents/{intent}"))
        .await;
    assert_eq!(at_stripe["status"], "canceled");
    assert!(shop.proxy.calls("POST /v1/payment_intents/") >= 1);
    assert_money(&shop.pool).await;
}

#[sqlx::test]
async fn a_payment_made_as_the_hold_ended_with_its_webhook_lost_is_still_settled(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    // Paid at Stripe just before the sweep; the webhook never comes: the
    // closer finds the intent succeeded instead of cancelling it.
    let shop = PaidShop::open(&connect, 3, false).await;
    let order = shop.buy("edge@example.org").await;
    let intent = shop.open_payment(&order).await;
    shop.stripe.pay(&intent).await;
    expire(&shop.pool, order.id).await;
    shop.wait_confirmed(order.id, "the late payment is settled")
        .await;
    assert_eq!(shop.messages(order.id, "order.paid").await, 1);
    assert_money(&shop.pool).await;
}
