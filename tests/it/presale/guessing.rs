//! Issue 34, finding 2: presale codes cannot be guessed at speed. Failed
//! code checks, on the event page (`?code=`) and in purchases, are limited
//! per client address and event: five are free, then each further check
//! waits twice as long as the last, answered 429 before any read, even for
//! the right code. Another address is not held back.

use std::net::{IpAddr, Ipv4Addr};

use reqwest::StatusCode;
use stampede::clock::Clock;

use super::*;

const RIGHT: &str = "FRONT-ROW-7Q2X";

/// The event page with `?code=`, from the app's default client (127.0.0.1).
async fn page_with_code(app: &TestApp, event_id: Uuid, code: &str) -> reqwest::Response {
    app.client
        .get(app.url(&format!("/events/{event_id}?code={code}")))
        .send()
        .await
        .unwrap()
}

#[sqlx::test]
async fn wrong_codes_on_the_page_are_slowed_per_address_with_growing_waits(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let tt = fixture.ticket_type_id();
    hidden_with_code(&pool, &fixture, tt, RIGHT, 10).await;
    let event = fixture.event_id;

    // The right code shows the hidden type.
    let resp = page_with_code(&app, event, RIGHT).await;
    assert!(resp.text().await.unwrap().contains(&tt.to_string()));
    // Six wrong guesses are answered (the sixth starts a 2 s wait)...
    for i in 0..6 {
        let resp = page_with_code(&app, event, &format!("GUESS-{i}")).await;
        assert_eq!(resp.status(), StatusCode::OK, "guess {i}");
        assert!(!resp.text().await.unwrap().contains(&tt.to_string()));
    }
    // ...then every check waits, the right code too: nothing is read.
    let resp = page_with_code(&app, event, RIGHT).await;
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(resp.headers()["retry-after"], "2");
    assert!(!resp.text().await.unwrap().contains(&tt.to_string()));
    // The same event's page without a code is not held back.
    let resp = app
        .client
        .get(app.url(&format!("/events/{event}")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);

    // Another address checks as before.
    let other = reqwest::Client::builder()
        .local_address(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)))
        .build()
        .unwrap();
    let resp = other
        .get(app.url(&format!("/events/{event}?code={RIGHT}")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(resp.text().await.unwrap().contains(&tt.to_string()));

    // After the wait, one more guess; wrong, the next wait is twice as long.
    app.clock.set(app.clock.now() + Span::seconds(2));
    let resp = page_with_code(&app, event, "GUESS-6").await;
    assert_eq!(resp.status(), StatusCode::OK);
    let resp = page_with_code(&app, event, RIGHT).await;
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(resp.headers()["retry-after"], "4");
    app.clock.set(app.clock.now() + Span::seconds(4));
    let resp = page_with_code(&app, event, RIGHT).await;
    assert!(resp.text().await.unwrap().contains(&tt.to_string()));
}

#[sqlx::test]
async fn wrong_codes_in_purchases_are_slowed_too_and_a_held_back_purchase_writes_nothing(
    pool: PgPool,
) {
    let app = TestApp::spawn_for_bursts(pool.clone()).await;
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let tt = fixture.ticket_type_id();
    hidden_with_code(&pool, &fixture, tt, RIGHT, 10).await;
    let buy = |code: &str, i: usize| {
        let body = json!({
            "ticket_type_id": tt,
            "quantity": 1,
            "email": format!("guesser{i}@example.org"),
            "idempotency_key": Uuid::new_v4().to_string(),
            "presale_code": code,
        });
        let request = app.client.post(app.url("/api/v1/orders")).json(&body);
        async move { request.send().await.unwrap() }
    };
    for i in 0..6 {
        let resp = buy(&format!("GUESS-{i}"), i).await;
        assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY, "guess {i}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["field"], "presale_code");
    }
    let resp = buy(RIGHT, 6).await;
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(resp.headers()["retry-after"], "2");
    let orders: i64 = sqlx::query_scalar("SELECT count(*) FROM orders")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(orders, 0);
    app.clock.set(app.clock.now() + Span::seconds(2));
    let resp = buy(RIGHT, 7).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
}

/// A code of the organizer's own built of a word and a year is flagged as
/// guessable, in the API and on the page; a generated one is not.
#[sqlx::test]
async fn a_guessable_code_of_ones_own_is_flagged_in_the_api_and_on_the_page(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("codes@example.org").await;
    let fixture =
        common::organizer::owned_published_event(&org, &[TicketSpec::new(10, 2, 2)]).await;
    let tt = fixture.ticket_type_id();
    let path = format!(
        "/api/v1/organizer/events/{}/presale-codes",
        fixture.event_id
    );
    for body in [
        json!({"code": "fanclub-2027", "max_uses": 4, "ticket_type_ids": [tt]}),
        json!({"count": 1, "max_uses": 4, "ticket_type_ids": [tt]}),
    ] {
        let resp = org
            .api(Method::POST, &path)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::CREATED);
    }
    let list: Value = org
        .api(Method::GET, &path)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let codes = list["codes"].as_array().unwrap();
    assert_eq!(codes.len(), 2, "{list}");
    for code in codes {
        let own = code["code"] == "FANCLUB-2027";
        assert_eq!(code["guessable"], own, "{code}");
    }
    let page = org
        .get(&format!("/organizer/events/{}/codes", fixture.event_id))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(page.matches(">guessable</span>").count(), 1, "{page}");
}
