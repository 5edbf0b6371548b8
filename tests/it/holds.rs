//! Issue 13: held orders, confirmed from the buyer's mailbox or expired by
//! the sweepers, against real Postgres (and a real SMTP server on loopback,
//! `common::smtp`). Every outcome is read from the tables.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::{
    TestApp, TicketSpec, assert_invariants,
    holds::{burst, engine, hold_for, messages, sweep},
    mailed_link, now, pool, published_event,
    purchase::purchase_request,
    smtp::Sink,
};
use futures::future::join_all;
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use stampede::{
    clock::ManualClock,
    domain::{ConfirmKey, OrderId, OrderStatus},
    error::AppError,
    mail::{self, MailSettings},
    sale::{self, Confirmed},
    web::AppState,
};
use time::Duration as Span;
use uuid::Uuid;

async fn remaining(pool: &PgPool, ticket_type_id: Uuid) -> i32 {
    sqlx::query_scalar("SELECT remaining FROM ticket_types WHERE id = $1")
        .bind(ticket_type_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The order's status, with an expired hold told apart from other cancelled
/// orders (the table keeps it `cancelled`, reason `expired`).
async fn status_of(pool: &PgPool, order_id: OrderId) -> String {
    sqlx::query_scalar(
        "SELECT CASE WHEN cancel_reason = 'expired' THEN status || ' (expired)' ELSE status END
         FROM orders WHERE id = $1",
    )
    .bind(order_id.get())
    .fetch_one(pool)
    .await
    .unwrap()
}

#[sqlx::test]
async fn two_hundred_buyers_for_ten_held_tickets_half_confirm_and_the_rest_expire_once(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect.clone(), 20).await;
    // A second instance's connections, for the second sweeper.
    let other_instance = common::pool(connect, 5).await;
    let fixture = published_event(&pool, &[TicketSpec::new(10, 1, 1)]).await;
    let tt = fixture.ticket_type_id();
    hold_for(&pool, fixture.event_id, 600).await;
    let key = ConfirmKey::random();
    let sales = engine(&pool, &key);
    let t0 = now();

    let (held, refused) = burst(&sales, tt, t0, "first", 200).await;
    assert_eq!((held.len(), refused), (10, 190));
    for order in &held {
        assert_eq!(order.status, OrderStatus::Held);
        // Postgres keeps microseconds.
        let ends = order.hold_expires_at.unwrap() - (t0 + Span::seconds(600));
        assert!(ends.abs() < Span::microseconds(1), "{ends}");
    }
    assert_eq!(
        remaining(&pool, tt).await,
        0,
        "a hold takes its stock at once"
    );
    // Held stock counts as live (and has no tickets): the invariants hold.
    assert_invariants(&pool).await;

    // Half confirm from their mail, a minute later.
    let (confirming, lapsing) = held.split_at(5);
    for order in confirming {
        let answer = sale::confirm(&pool, t0 + Span::minutes(1), order.id, &key.token(order.id))
            .await
            .unwrap();
        assert!(matches!(answer, Confirmed::Now(ref o) if o.status == OrderStatus::Confirmed));
    }
    // The rest expire: two sweepers (two instances) at once, twice over.
    let after = t0 + Span::seconds(601);
    let swept = join_all([
        sweep(&pool, after),
        sweep(&other_instance, after),
        sweep(&pool, after),
        sweep(&other_instance, after),
    ])
    .await;
    assert_eq!(
        swept.iter().sum::<u64>(),
        5,
        "each expired hold is claimed once: {swept:?}"
    );
    // Their stock came back exactly once, and the buyers' limits with it.
    assert_eq!(remaining(&pool, tt).await, 5);
    // Live orders are exactly those not cancelled: an expired hold is a
    // cancelled order (reason `expired`), so capacity = remaining + live.
    let not_cancelled: i64 = sqlx::query_scalar(
        "SELECT coalesce(sum(quantity), 0)::int8 FROM orders
         WHERE ticket_type_id = $1 AND status <> 'cancelled'",
    )
    .bind(tt)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(10, 5 + not_cancelled);
    let expired: Vec<Uuid> = lapsing.iter().map(|o| o.id.get()).collect();
    let mut expired_sorted = expired.clone();
    expired_sorted.sort();
    assert_eq!(
        messages(&pool, "order.expired").await,
        expired_sorted.iter().map(|id| (*id, 1)).collect::<Vec<_>>()
    );
    assert_eq!(messages(&pool, "order.confirmed").await.len(), 5);
    for order in lapsing {
        assert_eq!(status_of(&pool, order.id).await, "cancelled (expired)");
        // A click that comes too late is told so and changes nothing.
        let late = sale::confirm(&pool, after, order.id, &key.token(order.id)).await;
        assert!(matches!(late, Err(AppError::HoldExpired)), "{late:?}");
    }
    for order in confirming {
        assert_eq!(status_of(&pool, order.id).await, "confirmed");
        let again = sale::confirm(&pool, after, order.id, &key.token(order.id))
            .await
            .unwrap();
        assert!(matches!(again, Confirmed::Already(_)));
    }
    assert_eq!(
        messages(&pool, "order.confirmed").await.len(),
        5,
        "a second click confirms nothing"
    );
    assert_invariants(&pool).await;

    // The returned tickets sell again: the sold-out flag falls when the
    // stock comes back (its notification), and a new wave gets five.
    for _ in 0..100 {
        if !sales.known_sold_out(tt.into()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (second, refused) = burst(&sales, tt, after, "second", 200).await;
    assert_eq!((second.len(), refused), (5, 195));
    // The buyers whose holds expired may buy again: their limit is free.
    let retry = sales
        .purchase(after, &purchase_request(tt, 1, "first9@example.org"))
        .await;
    assert!(matches!(retry, Err(AppError::SoldOut)), "{retry:?}");
    assert_eq!(remaining(&pool, tt).await, 0);
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn a_confirmation_racing_the_expiry_has_exactly_one_winner(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect.clone(), 10).await;
    let sweeper_pool = common::pool(connect, 5).await;
    let fixture = published_event(&pool, &[TicketSpec::new(100, 1, 1)]).await;
    let tt = fixture.ticket_type_id();
    hold_for(&pool, fixture.event_id, 60).await;
    let key = ConfirmKey::random();
    let sales = engine(&pool, &key);
    let (mut confirmed, mut expired) = (0, 0);
    for round in 0..40 {
        let request = purchase_request(tt, 1, &format!("racer{round}@example.org"));
        let order = sales
            .purchase(now(), &request)
            .await
            .unwrap()
            .order()
            .clone();
        let ends = order.hold_expires_at.unwrap();
        // Both may win: the click a millisecond before the end, the sweep at it.
        let token = key.token(order.id);
        let (click, sweep) = tokio::join!(
            sale::confirm(&pool, ends - Span::milliseconds(1), order.id, &token),
            sale::expire_holds(&sweeper_pool, ends),
        );
        let status = status_of(&pool, order.id).await;
        match (click, sweep) {
            (Ok(Confirmed::Now(_)), Ok(0)) => {
                assert_eq!(status, "confirmed");
                confirmed += 1;
            }
            (Err(AppError::HoldExpired), Ok(1)) => {
                assert_eq!(status, "cancelled (expired)");
                expired += 1;
            }
            other => panic!("round {round}: not exactly one winner: {other:?} ({status})"),
        }
    }
    println!("confirmation won {confirmed} rounds, the sweeper {expired}");
    assert_eq!(remaining(&pool, tt).await, 100 - confirmed);
    assert_eq!(messages(&pool, "order.expired").await.len() as i32, expired);
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn the_confirmation_mail_arrives_and_its_link_confirms_once(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 10).await;
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let tt = fixture.ticket_type_id();
    hold_for(&pool, fixture.event_id, 600).await;
    let sink = Sink::start().await;
    let key = ConfirmKey::random();
    let clock = ManualClock::new(now());
    let state = AppState::new(pool.clone())
        .with_clock(clock.clone())
        .with_confirm_key(key.clone());
    let app = TestApp::spawn_state(pool.clone(), clock, state).await;
    let settings = |smtp: String| {
        MailSettings::new(
            Some(smtp),
            "Stampede <tickets@example.org>",
            "http://tickets.test",
        )
        .unwrap()
    };
    let mailer = mail::spawn(pool.clone(), key.clone(), settings(sink.url())).unwrap();

    let body = serde_json::json!({
        "ticket_type_id": tt,
        "quantity": 2,
        "email": "Ada@Example.org",
        "idempotency_key": "held-order-0123456789",
    });
    let created = app
        .client
        .post(app.url("/api/v1/orders"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let created: serde_json::Value = created.json().await.unwrap();
    assert_eq!(created["status"], "held");
    assert!(created["hold_expires_at"].is_string(), "{created}");
    let order_id: Uuid = created["id"].as_str().unwrap().parse().unwrap();
    // Until it is confirmed, the order page shows no ticket.
    let page = app
        .client
        .get(app.url(&format!("/orders/{order_id}")))
        .send()
        .await
        .unwrap();
    let page = page.text().await.unwrap();
    assert!(
        page.contains("held for you") && page.contains("Check your mailbox"),
        "{page}"
    );
    assert!(!page.contains("Your tickets"), "{page}");

    let mails = sink.wait_for(1, Duration::from_secs(20)).await;
    assert_eq!(mails.len(), 1, "one mail for one hold");
    let mail = &mails[0];
    assert_eq!(mail.to, ["ada@example.org"]);
    assert_eq!(
        mail.header("Subject").as_deref(),
        Some("Confirm your tickets")
    );
    let link = mail
        .line_starting("http://tickets.test/orders/")
        .expect("the mail carries the link");
    let path = link.strip_prefix("http://tickets.test").unwrap();
    assert!(
        path.starts_with(&format!("/orders/{order_id}/confirm?t=")),
        "{path}"
    );
    // The table keeps only the token's hash.
    let token = path.split("t=").nth(1).unwrap();
    let stored: Vec<u8> = sqlx::query_scalar("SELECT confirm_token_hash FROM orders WHERE id = $1")
        .bind(order_id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_ne!(stored, token.as_bytes());
    assert_eq!(stored, key.token(order_id.into()).hash());

    // Opening the link (a mail scanner's GET or HEAD) confirms nothing.
    for _ in 0..3 {
        let resp = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        let resp = app.client.head(app.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), 200);
    }
    assert_eq!(status_of(&pool, order_id.into()).await, "held");
    assert!(messages(&pool, "order.confirmed").await.is_empty());

    // A wrong token confirms nothing.
    let forged = format!("/orders/{order_id}/confirm?t={}", "A".repeat(43));
    let resp = mailed_link::press(&app, &forged).await;
    assert_eq!(resp.status(), 403);
    assert_eq!(status_of(&pool, order_id.into()).await, "held");
    // Nor does the POST without the CSRF field (a cross-site form).
    let resp = app
        .client
        .post(app.url(&format!("/orders/{order_id}/confirm")))
        .form(&[("t", token)])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    assert_eq!(status_of(&pool, order_id.into()).await, "held");

    // The page's button confirms; a second press lands on the same order,
    // whose page the token opens with the codes.
    for _ in 0..2 {
        let resp = mailed_link::press(&app, path).await;
        assert_eq!(resp.status(), 303);
        assert_eq!(
            resp.headers()["location"],
            format!("/orders/{order_id}?t={token}")
        );
    }
    assert_eq!(status_of(&pool, order_id.into()).await, "confirmed");
    assert_eq!(messages(&pool, "order.confirmed").await, [(order_id, 1)]);
    let page = app
        .client
        .get(app.url(&format!("/orders/{order_id}?t={token}")))
        .send()
        .await
        .unwrap();
    let page = page.text().await.unwrap();
    assert!(
        page.contains("You have 2 tickets") && page.contains("Your tickets"),
        "{page}"
    );
    // Whoever has only the order id sees the order, not the codes.
    let page = app
        .client
        .get(app.url(&format!("/orders/{order_id}")))
        .send()
        .await
        .unwrap();
    let page = page.text().await.unwrap();
    assert!(page.contains("You have 2 tickets"), "{page}");
    assert!(!page.contains("Your tickets"), "{page}");
    assert!(!page.contains("ticket-code"), "{page}");
    assert_invariants(&pool).await;

    // The confirmation brings the tickets' mail; then another instance's
    // mailer, and this one restarted, send nothing again.
    let tickets = sink
        .wait_for_mail(Duration::from_secs(20), |m| {
            m.header("Subject")
                .is_some_and(|s| s.starts_with("Your tickets"))
        })
        .await;
    assert_eq!(tickets.to, ["ada@example.org"]);
    // Recorded (the mailer records a mail just after the server took it:
    // stopped in between, it would send it again, by design), then stopped.
    for _ in 0..200 {
        let recorded: i64 = sqlx::query_scalar("SELECT count(*) FROM mail_sent")
            .fetch_one(&pool)
            .await
            .unwrap();
        if recorded == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    mailer.abort();
    let again = [
        mail::spawn(pool.clone(), key.clone(), settings(sink.url())).unwrap(),
        mail::spawn(pool.clone(), key.clone(), settings(sink.url())).unwrap(),
    ];
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(sink.mails().len(), 2);
    let sent: i64 = sqlx::query_scalar("SELECT count(*) FROM mail_sent")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(sent, 2);
    for task in again {
        task.abort();
    }
}

#[sqlx::test]
async fn held_stock_shows_as_in_baskets_not_sold_out(_: PgPoolOptions, connect: PgConnectOptions) {
    let pool = pool(connect, 10).await;
    let fixture = published_event(&pool, &[TicketSpec::new(2, 2, 2)]).await;
    let tt = fixture.ticket_type_id();
    hold_for(&pool, fixture.event_id, 600).await;
    let key = ConfirmKey::random();
    let clock = ManualClock::new(now());
    let state = AppState::new(pool.clone())
        .with_clock(clock.clone())
        .with_confirm_key(key.clone());
    let app = TestApp::spawn_state(pool.clone(), clock.clone(), state).await;
    let order = engine(&pool, &key)
        .purchase(now(), &purchase_request(tt, 2, "bea@example.org"))
        .await
        .unwrap()
        .order()
        .clone();
    let event_page = |app: &TestApp| {
        let url = app.url(&format!("/events/{}", fixture.event_id));
        let client = app.client.clone();
        async move { client.get(url).send().await.unwrap().text().await.unwrap() }
    };
    // The page cache keeps a page for up to a second.
    let mut page = event_page(&app).await;
    for _ in 0..40 {
        if page.contains("in baskets") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        page = event_page(&app).await;
    }
    assert!(
        page.contains("All tickets are in baskets — some may come back"),
        "{page}"
    );
    assert!(!page.contains("Sold out"), "{page}");

    sale::confirm(&pool, now(), order.id, &key.token(order.id))
        .await
        .unwrap();
    for _ in 0..40 {
        page = event_page(&app).await;
        if page.contains("Sold out") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(page.contains("Sold out"), "{page}");
    assert!(!page.contains("in baskets"), "{page}");
}
