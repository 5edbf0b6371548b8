//! Buyer pages: the event list, an event, buying through the form, the order page.

use reqwest::StatusCode;
use sqlx::PgPool;
use time::{Duration as Span, OffsetDateTime};
use uuid::Uuid;

use crate::{
    common::{organizer::*, *},
    http::support::*,
};

#[sqlx::test]
async fn home_page_lists_published_events_but_not_drafts(pool: PgPool) {
    let published = published_event(&pool, &[TicketSpec::new(50, 4, 4)]).await;
    let opened = opened();
    let draft = event_with_window(&pool, opened, None, "draft", &[TicketSpec::new(50, 4, 4)]).await;
    let app = TestApp::spawn(pool.clone()).await;

    let resp = get(&app, "/").await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let body = resp.text().await.unwrap();
    assert!(
        body.contains(&format!("href=\"/events/{}\"", published.event_id)),
        "{body}"
    );
    assert!(body.contains("50 of 50 left"), "{body}");
    assert!(
        !body.contains(&draft.event_id.to_string()),
        "a draft is listed: {body}"
    );
}

#[sqlx::test]
async fn home_page_without_events_says_there_are_none(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let body = get(&app, "/").await.text().await.unwrap();
    assert!(body.contains("No events on sale yet"), "{body}");
}

#[sqlx::test]
async fn event_page_shows_ticket_types_remaining_and_a_buy_form_with_an_idempotency_key(
    pool: PgPool,
) {
    let fixture = published_event(
        &pool,
        &[TicketSpec::new(10, 4, 6), TicketSpec::new(3, 2, 2)],
    )
    .await;
    let app = TestApp::spawn(pool.clone()).await;
    api_buy(&app, fixture.ticket_type_ids[0], 3, "early@example.org").await;

    let resp = get(&app, &format!("/events/{}", fixture.event_id)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let body = resp.text().await.unwrap();
    assert!(body.contains("Test concert"), "{body}");
    assert!(body.contains("Test hall"), "{body}");
    assert!(body.contains("General admission 0"), "{body}");
    assert!(body.contains("General admission 1"), "{body}");
    assert!(body.contains("25.00 EUR"), "{body}");
    assert!(body.contains("7 of 10 left"), "{body}");
    assert!(body.contains("3 of 3 left"), "{body}");
    assert!(
        body.contains(&format!("action=\"/events/{}/orders\"", fixture.event_id)),
        "{body}"
    );
    for id in &fixture.ticket_type_ids {
        assert!(
            body.contains(&format!("name=\"ticket_type_id\" value=\"{id}\"")),
            "{body}"
        );
    }
    assert!(body.contains("name=\"quantity\""), "{body}");
    assert!(body.contains("name=\"email\""), "{body}");
    let key = idempotency_key_in(&body);
    assert!(
        body.contains("type=\"hidden\" name=\"idempotency_key\""),
        "{body}"
    );
    Uuid::parse_str(&key).expect("the key is a UUID");

    // Every render carries a fresh key, so two tabs are two purchases.
    let again = page_text(&app, &format!("/events/{}", fixture.event_id)).await;
    assert_ne!(idempotency_key_in(&again), key);
}

#[sqlx::test]
async fn event_page_of_a_draft_an_unknown_id_or_a_garbage_id_is_not_found(pool: PgPool) {
    let opened = opened();
    let draft = event_with_window(&pool, opened, None, "draft", &[TicketSpec::new(5, 1, 1)]).await;
    let app = TestApp::spawn(pool).await;

    for path in [
        format!("/events/{}", draft.event_id),
        format!("/events/{}", Uuid::new_v4()),
        "/events/not-a-uuid".to_owned(),
        "/events/1".to_owned(),
        format!("/orders/{}", Uuid::new_v4()),
        "/orders/garbage".to_owned(),
        "/no/such/page".to_owned(),
    ] {
        let resp = get(&app, &path).await;
        assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{path}");
        let body = resp.text().await.unwrap();
        assert!(body.contains("Not found"), "{path}: {body}");
        assert!(!body.contains("Test concert"), "{path}: {body}");
    }
}

#[sqlx::test]
async fn sold_out_event_page_says_so_and_has_no_buy_form(pool: PgPool) {
    let (app, fixture) = app_with_event(&pool, &[TicketSpec::new(2, 2, 2)]).await;
    api_buy(&app, fixture.ticket_type_id(), 2, "all@example.org").await;
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 0);

    let resp = get(&app, &format!("/events/{}", fixture.event_id)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let body = resp.text().await.unwrap();
    assert!(
        body.contains("Sold out. Every ticket has found its owner."),
        "{body}"
    );
    assert!(!body.contains("idempotency_key"), "{body}");
    assert!(!body.contains("Buy tickets"), "{body}");
    assert!(!body.contains("/orders\""), "{body}");
}

#[sqlx::test]
async fn event_page_before_the_sale_opens_says_when_it_opens_and_has_no_form(pool: PgPool) {
    let opens = OffsetDateTime::now_utc() + Span::days(2);
    let fixture =
        event_with_window(&pool, opens, None, "published", &[TicketSpec::new(5, 2, 2)]).await;
    let app = TestApp::spawn(pool).await;

    let resp = get(&app, &format!("/events/{}", fixture.event_id)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let body = resp.text().await.unwrap();
    // The time in the event's zone (UTC here), labeled, in a <time> whose
    // instant the page's script reads.
    assert!(
        body.contains("The sale opens <time datetime=\"")
            && body.contains(&format!("data-zone=\"UTC\">{}</time>.", shown_time(opens))),
        "{body}"
    );
    assert!(
        body.contains(&format!(
            "data-opens-at=\"{}\"",
            opens.unix_timestamp_nanos() / 1_000_000
        )),
        "{body}"
    );
    assert!(!body.contains("idempotency_key"), "{body}");
    assert!(!body.contains("Buy tickets"), "{body}");
}

#[sqlx::test]
async fn buying_through_the_form_redirects_to_the_order_page_which_shows_the_order(pool: PgPool) {
    let (app, fixture) = app_with_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let page = page_text(&app, &format!("/events/{}", fixture.event_id)).await;
    let key = idempotency_key_in(&page);

    let resp = buy_on_page(&app, &fixture, "2", "  Ada@Example.org ", key.as_str()).await;
    let order_id = order_id_from_redirect(&resp);
    let order_page = location(&resp);
    assert!(order_page.contains("?s="), "{order_page}: no cancel secret");

    let (email, quantity, status, ticket_type_id): (String, i32, String, Uuid) =
        sqlx::query_as("SELECT email, quantity, status, ticket_type_id FROM orders WHERE id = $1")
            .bind(order_id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(
        (email.as_str(), quantity, status.as_str(), ticket_type_id),
        ("ada@example.org", 2, "confirmed", fixture.ticket_type_id())
    );
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 8);

    // The order id alone shows the order but offers no cancel.
    let body = page_text(&app, &format!("/orders/{order_id}")).await;
    assert!(body.contains("You have 2 tickets"), "{body}");
    assert!(!body.contains("Cancel this order"), "{body}");

    let resp = get(&app, &order_page).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let body = resp.text().await.unwrap();
    assert!(body.contains("You have 2 tickets"), "{body}");
    assert!(body.contains("Order confirmed"), "{body}");
    assert!(body.contains("2 × General admission 0"), "{body}");
    assert!(body.contains("50.00 EUR"), "{body}");
    assert!(body.contains("ada@example.org"), "{body}");
    assert!(body.contains(&order_id.to_string()), "{body}");
    assert!(
        body.contains(&format!("action=\"/orders/{order_id}/cancel\"")),
        "{body}"
    );
    assert_eq!(order_count(&pool).await, 1);
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn resubmitting_the_buy_form_with_the_same_key_lands_on_the_same_order(pool: PgPool) {
    let (app, fixture) = app_with_event(&pool, &[TicketSpec::new(10, 4, 8)]).await;
    let tt = fixture.ticket_type_id().to_string();
    let key = Uuid::new_v4().to_string();
    let fields = [
        ("ticket_type_id", tt.as_str()),
        ("quantity", "3"),
        ("email", "ada@example.org"),
        ("idempotency_key", key.as_str()),
    ];
    let path = format!("/events/{}/orders", fixture.event_id);

    let first = post_form(&app, &path, &fields).await;
    let second = post_form(&app, &path, &fields).await;
    assert_eq!(
        order_id_from_redirect(&first),
        order_id_from_redirect(&second)
    );
    // The secret is given once: the replay lands on the plain order page.
    assert!(location(&first).contains("?s="));
    assert_eq!(
        location(&second),
        format!("/orders/{}", order_id_from_redirect(&second))
    );
    assert_books(&pool, fixture.ticket_type_id(), 1, 7).await;
}

#[sqlx::test]
async fn cancelling_an_order_through_the_page_returns_its_tickets_once(pool: PgPool) {
    let (app, fixture) = app_with_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let (order_id, secret) =
        api_buy_with_secret(&app, fixture.ticket_type_id(), 3, "ada@example.org").await;
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 7);
    let order_page = format!("/orders/{order_id}?s={secret}");
    let body = page_text(&app, &order_page).await;
    assert!(
        body.contains(&format!("name=\"s\" value=\"{secret}\"")),
        "{body}"
    );

    let cancel = format!("/orders/{order_id}/cancel");
    let resp = post_form(&app, &cancel, &[("s", &secret)]).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), order_page);
    assert_eq!(order_status(&pool, order_id).await, "cancelled");
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 10);

    // A double click: the same redirect, and the tickets come back only once.
    let resp = post_form(&app, &cancel, &[("s", &secret)]).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), order_page);
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 10);

    let body = page_text(&app, &order_page).await;
    assert!(body.contains("Order cancelled"), "{body}");
    assert!(!body.contains("Cancel this order"), "{body}");
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn the_order_id_alone_cannot_cancel_an_order(pool: PgPool) {
    let (app, fixture) = app_with_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let (order_id, secret) =
        api_buy_with_secret(&app, fixture.ticket_type_id(), 3, "ada@example.org").await;
    let cancel = format!("/orders/{order_id}/cancel");
    let other = api_buy_with_secret(&app, fixture.ticket_type_id(), 1, "bob@example.org").await;
    let mut wrong = secret.clone();
    wrong.replace_range(..1, if secret.starts_with('A') { "B" } else { "A" });
    for fields in [
        vec![],
        vec![("s", "")],
        vec![("s", "short")],
        vec![("s", wrong.as_str())],
        vec![("s", other.1.as_str())],
    ] {
        let resp = post_form(&app, &cancel, &fields).await;
        assert_eq!(resp.status(), StatusCode::FORBIDDEN, "{fields:?}");
        let resp = post_empty(
            &app,
            &format!(
                "/api/v1/orders/{order_id}/cancel?s={}",
                fields.first().map_or("", |f| f.1)
            ),
        )
        .await;
        assert_api_error(resp, StatusCode::FORBIDDEN, "forbidden", None).await;
    }
    assert_eq!(order_status(&pool, order_id).await, "confirmed");
    assert_books(&pool, fixture.ticket_type_id(), 2, 6).await;
    // Only the hash is stored.
    let stored: Vec<u8> = sqlx::query_scalar("SELECT cancel_secret_hash FROM orders WHERE id = $1")
        .bind(order_id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored.len(), 32);
    assert!(!String::from_utf8_lossy(&stored).contains(&secret));
    let resp = post_form(&app, &cancel, &[("s", &secret)]).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(order_status(&pool, order_id).await, "cancelled");
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn cancelling_an_unknown_order_through_the_page_is_not_found(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let resp = post_button(&app, &format!("/orders/{}/cancel", Uuid::new_v4())).await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let resp = post_button(&app, "/orders/nope/cancel").await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
}

/// The event page comes from a cache about a second old at most: a
/// cancelled event stops being offered once that period has passed.
#[sqlx::test]
async fn a_cancelled_event_is_not_offered_after_the_cache_period(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let app = TestApp::spawn(pool.clone()).await;
    let path = format!("/events/{}", fixture.event_id);
    let before = get(&app, &path).await.text().await.unwrap();
    assert!(before.contains("name=\"quantity\""), "{before}");

    stampede::sale::cancel_event(&pool, fixture.organizer_id.into(), fixture.event_id.into())
        .await
        .unwrap();
    tokio::time::sleep(
        stampede::web::event_cache::FRESH_FOR + std::time::Duration::from_millis(200),
    )
    .await;

    let after = get(&app, &path).await.text().await.unwrap();
    assert!(after.contains("This event was cancelled."), "{after}");
    assert!(!after.contains("name=\"quantity\""), "{after}");
    let api: serde_json::Value =
        reqwest::get(app.url(&format!("/api/v1/events/{}", fixture.event_id)))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    assert_eq!(api["status"], "cancelled", "{api}");
}

#[sqlx::test]
async fn readyz_answers_when_the_database_does(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let resp = get(&app, "/readyz").await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.text().await.unwrap(), "ready");
}

/// A draining instance's `/readyz` answers 503, a refusal by design that
/// the balancer checks several times a second: not an ERROR line each.
#[sqlx::test]
async fn a_draining_instances_readyz_answers_503_without_an_error_line(pool: PgPool) {
    let logs = logs::Captured::install();
    let clock = stampede::clock::ManualClock::new(now());
    let state = stampede::AppState::new(pool.clone()).with_clock(clock.clone());
    let draining = state.draining.clone();
    let app = TestApp::spawn_state(pool, clock, state).await;
    assert_eq!(get(&app, "/readyz").await.status(), StatusCode::OK);
    draining.store(true, std::sync::atomic::Ordering::Relaxed);
    let resp = get(&app, "/readyz").await;
    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(resp.text().await.unwrap(), "draining");
    let text = logs.text();
    assert!(!text.contains("ERROR"), "{text}");
}
