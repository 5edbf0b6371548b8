//! Issue 7, item 5: the public list comes a page at a time, without
//! descriptions, from a short shared cache; what one organizer can create
//! is bounded by configurable quotas.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;
use stampede::{clock::ManualClock, domain::Quotas, web::AppState};
use uuid::Uuid;

use crate::{
    common::{organizer::*, *},
    http::support::*,
};

/// `n` published upcoming events with long descriptions (and, to be left
/// out, drafts and past events), written straight into the tables. Every
/// five share a start time, so the order must also go by id.
async fn many_events(pool: &PgPool, n: i64) -> Vec<Uuid> {
    let organizer = fixture_organizer(pool).await;
    sqlx::query(
        "INSERT INTO events (organizer_id, title, description, venue, starts_at, sale_opens_at, status)
         SELECT $1, 'Event ' || g, repeat('long text ', 500), 'Hall',
                now() + interval '1 day' * (1 + g / 5), now() - interval '1 hour', 'published'
         FROM generate_series(1, $2) g
         UNION ALL
         SELECT $1, 'Draft', '', 'Hall', now() + interval '2 days', now(), 'draft'
         UNION ALL
         SELECT $1, 'Past', '', 'Hall', now() - interval '2 days', now() - interval '3 days', 'published'",
    )
    .bind(organizer)
    .bind(n)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO ticket_types (event_id, name, price_minor, currency, capacity, remaining, max_per_order, max_per_buyer)
         SELECT id, 'Standing', 100, 'EUR', 10, 10, 2, 2 FROM events",
    )
    .execute(pool)
    .await
    .unwrap();
    sqlx::query_scalar(
        "SELECT id FROM events WHERE status = 'published' AND starts_at > now() ORDER BY starts_at, id",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

async fn json_of(app: &TestApp, path: &str) -> Value {
    let resp = get(app, path).await;
    assert_eq!(resp.status(), StatusCode::OK, "{path}");
    resp.json().await.unwrap()
}

#[sqlx::test]
async fn the_public_list_pages_through_every_event_once_without_descriptions(pool: PgPool) {
    let expected = many_events(&pool, 120).await;
    let app = TestApp::spawn(pool.clone()).await;

    let mut seen = Vec::new();
    let mut path = "/api/v1/events".to_owned();
    let mut pages = 0;
    loop {
        let page = json_of(&app, &path).await;
        pages += 1;
        let events = page["events"].as_array().unwrap();
        assert!(events.len() <= 50, "{} events on a page", events.len());
        for event in events {
            assert!(event.get("description").is_none(), "{event}");
            assert_eq!(event["ticket_types"][0]["remaining"], 10);
            seen.push(Uuid::parse_str(event["id"].as_str().unwrap()).unwrap());
        }
        match page["next"].as_str() {
            Some(next) => path = format!("/api/v1/events?after={next}"),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, expected);

    // The page shows the same pages, linked.
    let first = page_text(&app, "/").await;
    assert_eq!(first.matches("class=\"card\"").count(), 50, "{first}");
    assert!(!first.contains("long text"), "{first}");
    let marker = "rel=\"next\" href=\"";
    let start = first.find(marker).expect("a link to the next page") + marker.len();
    let next = &first[start..start + first[start..].find('"').unwrap()];
    let second = page_text(&app, &next.replace("&amp;", "&")).await;
    assert!(
        second.contains(&format!("/events/{}", expected[50])),
        "{second}"
    );
    assert!(
        !second.contains(&format!("/events/{}", expected[49])),
        "{second}"
    );
}

#[sqlx::test]
async fn a_cursor_that_is_not_one_is_a_422_naming_after(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    for junk in ["x", "MTIzLm5vcGU", "%00"] {
        let resp = get(&app, &format!("/api/v1/events?after={junk}")).await;
        assert_invalid(resp, "after").await;
        let resp = get(&app, &format!("/?after={junk}")).await;
        assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    }
}

#[sqlx::test]
async fn the_public_list_is_served_from_a_shared_cache(pool: PgPool) {
    let clock = ManualClock::new(now());
    let state = AppState::new(pool.clone())
        .with_clock(clock.clone())
        .with_list_cache_ttl(Duration::from_secs(3600));
    let app = TestApp::spawn_state(pool.clone(), clock, state).await;
    let before = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    assert_eq!(
        json_of(&app, "/api/v1/events").await["events"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // A new event is not in the list until the cached page expires (an
    // hour here, a second by default), on the API and the page alike...
    let later = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let list = json_of(&app, "/api/v1/events").await;
    assert_eq!(list["events"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["events"][0]["id"], before.event_id.to_string());
    let page = page_text(&app, "/").await;
    assert!(!page.contains(&later.event_id.to_string()), "{page}");
    // ...while the event itself, and its stock, are read fresh.
    let detail = json_of(&app, &format!("/api/v1/events/{}", later.event_id)).await;
    assert_eq!(detail["id"], later.event_id.to_string());
}

fn event_body(status: &str, types: usize, capacity: i64) -> Value {
    let ticket_types: Vec<Value> = (0..types)
        .map(|i| json!({"name": format!("T{i}"), "price_minor": 100, "currency": "EUR", "capacity": capacity}))
        .collect();
    json!({
        "title": "Night", "venue": "Hall", "status": status, "payment": "offline",
        "starts_at": "2030-03-01T19:30:00Z", "sale_opens_at": "2020-01-01T10:00:00Z",
        "ticket_types": ticket_types,
    })
}

async fn quota_app(pool: &PgPool) -> TestApp {
    let clock = ManualClock::new(now());
    let state = AppState::new(pool.clone())
        .with_clock(clock.clone())
        .with_list_cache_ttl(Duration::ZERO)
        .with_quotas(Quotas {
            published_events: 2,
            ticket_types_per_event: 3,
            total_capacity: 100,
            ..Quotas::default()
        });
    TestApp::spawn_state(pool.clone(), clock, state).await
}

#[sqlx::test]
async fn organizer_quotas_bound_published_events_ticket_types_and_capacity(pool: PgPool) {
    let app = quota_app(&pool).await;
    let org = app.organizer("org@example.org").await;
    let create = |body: Value| {
        let org = &org;
        async move { api_create_event(org, &body).await }
    };

    assert_eq!(
        create(event_body("published", 1, 10)).await.status(),
        StatusCode::CREATED
    );
    assert_eq!(
        create(event_body("published", 3, 10)).await.status(),
        StatusCode::CREATED
    );
    assert_invalid(create(event_body("published", 1, 10)).await, "status").await;
    assert_invalid(create(event_body("draft", 4, 1)).await, "ticket_types").await;
    // 40 tickets so far; 61 more is one too many, 60 fits.
    assert_invalid(create(event_body("draft", 1, 61)).await, "ticket_types").await;
    let resp = create(event_body("draft", 2, 30)).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let draft: Value = resp.json().await.unwrap();
    assert_eq!(event_count(&pool).await, 3);

    // Publishing the draft from its page is refused too.
    let resp = org
        .post_form(
            &format!(
                "/organizer/events/{}/publish",
                draft["id"].as_str().unwrap()
            ),
            &[],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let published: i64 = count(
        &pool,
        "SELECT count(*) FROM events WHERE status = 'published'",
    )
    .await;
    assert_eq!(published, 2);
    // Another organizer has quotas of their own.
    let other = app.organizer("other@example.org").await;
    let resp = api_create_event(&other, &event_body("published", 1, 10)).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
}

#[sqlx::test]
async fn concurrent_creates_cannot_together_pass_the_published_quota(
    _: sqlx::postgres::PgPoolOptions,
    connect: sqlx::postgres::PgConnectOptions,
) {
    let pool = pool(connect, 32).await;
    let organizer = fixture_organizer(&pool).await;
    let quotas = Quotas {
        published_events: 2,
        ticket_types_per_event: 3,
        total_capacity: 1_000,
        ..Quotas::default()
    };
    let input = stampede::domain::EventInput {
        title: "Night".into(),
        venue: "Hall".into(),
        starts_at: "2030-03-01T19:30:00Z".into(),
        sale_opens_at: "2020-01-01T10:00:00Z".into(),
        status: "published".into(),
        ticket_types: vec![stampede::domain::TicketTypeInput {
            name: "Standing".into(),
            price: "1.00".into(),
            capacity: "5".into(),
            ..Default::default()
        }],
        payment: "offline".into(),
        ..Default::default()
    };
    let new = input.parse(&stampede::domain::Zone::utc()).unwrap();
    // Open the connections first, so that the creates start together.
    let mut warm = Vec::new();
    for _ in 0..24 {
        warm.push(pool.acquire().await.unwrap());
    }
    drop(warm);
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(24));
    let tasks: Vec<_> = (0..24)
        .map(|_| {
            let (pool, new, barrier) = (pool.clone(), new.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                stampede::db::events::create(&pool, organizer.into(), &quotas, &new).await
            })
        })
        .collect();
    let mut created = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => created += 1,
            Err(stampede::error::AppError::Invalid(invalid)) => assert_eq!(invalid.field, "status"),
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(created, 2);
    assert_eq!(event_count(&pool).await, 2);
    pool.close().await;
}
