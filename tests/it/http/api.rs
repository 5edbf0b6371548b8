//! The JSON API: events, orders, and errors in one shape.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sqlx::PgPool;
use time::{Duration as Span, OffsetDateTime};
use uuid::Uuid;

use crate::{
    common::{organizer::*, *},
    http::support::*,
};

fn api_event(title: &str, status: Option<&str>) -> Value {
    let mut body = json!({
        "title": title,
        "venue": "API hall",
        "description": "Made by a script.",
        "starts_at": "2030-03-01T19:30:00Z",
        "sale_opens_at": "2020-01-01T10:00:00Z",
        "ticket_types": [
            {"name": "Standing", "price_minor": 2500, "currency": "EUR", "capacity": 100,
             "max_per_order": 4, "max_per_buyer": 6},
            {"name": "Seated", "price_minor": 4000, "currency": "eur", "capacity": 50},
        ],
    });
    if let Some(status) = status {
        body["status"] = json!(status);
    }
    body
}

#[sqlx::test]
async fn api_creates_an_event_with_its_ticket_types(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("api@example.org").await;
    let resp = api_create_event(&org, &api_event("API concert", Some("published"))).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let body: Value = resp.json().await.unwrap();
    let id = Uuid::parse_str(body["id"].as_str().unwrap()).unwrap();
    assert_eq!(body["status"], "published");
    assert_eq!(body["title"], "API concert");
    assert_eq!(body["venue"], "API hall");
    assert_eq!(body["starts_at"], "2030-03-01T19:30:00Z");
    let tts = body["ticket_types"].as_array().unwrap();
    assert_eq!(tts.len(), 2);
    assert_eq!(tts[0]["name"], "Standing");
    assert_eq!(tts[0]["capacity"], 100);
    assert_eq!(tts[0]["remaining"], 100);
    assert_eq!(tts[0]["price_minor"], 2500);
    assert_eq!(tts[0]["max_per_order"], 4);
    assert_eq!(tts[0]["max_per_buyer"], 6);
    assert_eq!(tts[1]["name"], "Seated");
    assert_eq!(tts[1]["currency"], "EUR");
    assert_eq!(tts[1]["capacity"], 50);
    assert_eq!(tts[1]["remaining"], 50);
    assert_eq!(tts[1]["max_per_order"], 10);
    assert_eq!(tts[1]["max_per_buyer"], 10);

    let in_db: Vec<(Uuid, i32, i32)> = sqlx::query_as(
        "SELECT id, capacity, remaining FROM ticket_types WHERE event_id = $1 ORDER BY position",
    )
    .bind(id)
    .fetch_all(&pool)
    .await
    .unwrap();
    let returned: Vec<(Uuid, i32, i32)> = tts
        .iter()
        .map(|t| {
            (
                Uuid::parse_str(t["id"].as_str().unwrap()).unwrap(),
                t["capacity"].as_i64().unwrap() as i32,
                t["remaining"].as_i64().unwrap() as i32,
            )
        })
        .collect();
    assert_eq!(in_db, returned);
    assert_eq!(event_status(&pool, id).await, "published");
    // The event belongs to the organizer whose token created it.
    let owner: Option<Uuid> =
        scalar(&pool, "SELECT organizer_id FROM events WHERE id = $1", id).await;
    assert_eq!(owner, Some(org.id));
}

#[sqlx::test]
async fn api_event_creation_rejects_invalid_input_and_writes_nothing(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("api@example.org").await;
    let mut missing_venue = api_event("No venue", None);
    missing_venue.as_object_mut().unwrap().remove("venue");
    let mut negative = api_event("Negative", None);
    negative["ticket_types"][1]["capacity"] = json!(-5);
    let mut no_types = api_event("Empty", None);
    no_types["ticket_types"] = json!([]);
    let mut bad_date = api_event("Bad date", None);
    bad_date["starts_at"] = json!("next friday");
    let mut unknown_field = api_event("Extra", None);
    unknown_field["colour"] = json!("red");
    let bad_status = api_event("Status", Some("live"));

    let cases = [
        (missing_venue, "venue"),
        (negative, "ticket_types[1].capacity"),
        (no_types, "ticket_types"),
        (bad_date, "starts_at"),
        (bad_status, "status"),
    ];
    for (body, field) in cases {
        let resp = api_create_event(&org, &body).await;
        assert_invalid(resp, field).await;
    }
    let resp = api_create_event(&org, &unknown_field).await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["field"], "colour", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("colour")),
        "the refusal names the unknown field: {body}"
    );
    assert_eq!(event_count(&pool).await, 0);
    assert_eq!(ticket_type_count(&pool).await, 0);
}

#[sqlx::test]
async fn api_lists_and_shows_published_events_only(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("api@example.org").await;
    let published: Value = api_create_event(&org, &api_event("Public", Some("published")))
        .await
        .json()
        .await
        .unwrap();
    let draft: Value = api_create_event(&org, &api_event("Hidden", None))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(draft["status"], "draft");
    let published_id = published["id"].as_str().unwrap();
    let draft_id = draft["id"].as_str().unwrap();
    let standing = Uuid::parse_str(published["ticket_types"][0]["id"].as_str().unwrap()).unwrap();
    api_buy(&app, standing, 3, "ada@example.org").await;

    let resp = get(&app, "/api/v1/events").await;
    assert_eq!(resp.status(), StatusCode::OK);
    let list: Value = resp.json().await.unwrap();
    let events = list["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{list}");
    assert_eq!(events[0]["id"], published_id);
    assert_eq!(events[0]["status"], "published");
    assert_eq!(events[0]["ticket_types"][0]["capacity"], 100);
    assert_eq!(events[0]["ticket_types"][0]["remaining"], 97);
    assert_eq!(events[0]["ticket_types"][1]["remaining"], 50);

    let resp = get(&app, &format!("/api/v1/events/{published_id}")).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let one: Value = resp.json().await.unwrap();
    assert_eq!(one["id"], published_id);
    assert_eq!(one["title"], "Public");
    assert_eq!(one["ticket_types"][0]["id"], standing.to_string());
    assert_eq!(one["ticket_types"][0]["capacity"], 100);
    assert_eq!(one["ticket_types"][0]["remaining"], 97);

    for path in [
        format!("/api/v1/events/{draft_id}"),
        format!("/api/v1/events/{}", Uuid::new_v4()),
        "/api/v1/events/garbage".to_owned(),
    ] {
        let resp = get(&app, &path).await;
        assert_api_error(resp, StatusCode::NOT_FOUND, "not_found", None).await;
    }
}

#[sqlx::test]
async fn api_order_is_created_replayed_with_the_same_key_and_conflicts_on_a_different_quantity(
    pool: PgPool,
) {
    let (app, fixture) = app_with_event(&pool, &[TicketSpec::new(10, 4, 8)]).await;
    let request = order_json(
        fixture.ticket_type_id(),
        2,
        "Ada@Example.org",
        "order-1-0123456789abcdef",
    );

    let resp = post_json(&app, "/api/v1/orders", &request).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let created: Value = resp.json().await.unwrap();
    assert_eq!(created["quantity"], 2);
    assert_eq!(created["email"], "ada@example.org");
    assert_eq!(created["status"], "confirmed");
    assert_eq!(created["unit_price_minor"], 2500);
    assert_eq!(created["currency"], "EUR");
    assert_eq!(
        created["ticket_type_id"],
        fixture.ticket_type_id().to_string()
    );

    let secret = created["cancel_secret"].as_str().unwrap();
    assert_eq!(secret.len(), 43, "{created}");
    assert_eq!(
        created["cancel_url"],
        format!("/orders/{}?s={secret}", created["id"].as_str().unwrap())
    );

    let resp = post_json(&app, "/api/v1/orders", &request).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let replayed: Value = resp.json().await.unwrap();
    assert_eq!(replayed["id"], created["id"]);
    // The secret is given once: a replay (or a guessed key) cannot cancel.
    assert!(replayed.get("cancel_secret").is_none(), "{replayed}");
    assert!(replayed.get("cancel_url").is_none(), "{replayed}");
    assert_books(&pool, fixture.ticket_type_id(), 1, 8).await;

    let mut different = request.clone();
    different["quantity"] = json!(3);
    let resp = post_json(&app, "/api/v1/orders", &different).await;
    assert_api_error(
        resp,
        StatusCode::CONFLICT,
        "idempotency_conflict",
        Some("idempotency_key"),
    )
    .await;
    assert_books(&pool, fixture.ticket_type_id(), 1, 8).await;
}

#[sqlx::test]
async fn api_get_and_cancel_order_then_a_second_cancel_is_already_cancelled(pool: PgPool) {
    let (app, fixture) = app_with_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let (order_id, secret) =
        api_buy_with_secret(&app, fixture.ticket_type_id(), 4, "ada@example.org").await;

    let resp = get(&app, &format!("/api/v1/orders/{order_id}")).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let order: Value = resp.json().await.unwrap();
    assert_eq!(order["id"], order_id.to_string());
    assert_eq!(order["quantity"], 4);
    assert_eq!(order["status"], "confirmed");

    let resp = post_empty(&app, &format!("/api/v1/orders/{order_id}/cancel")).await;
    assert_api_error(resp, StatusCode::FORBIDDEN, "forbidden", None).await;
    let cancel = format!("/api/v1/orders/{order_id}/cancel?s={secret}");
    let resp = post_empty(&app, &cancel).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let cancelled: Value = resp.json().await.unwrap();
    assert_eq!(cancelled["id"], order_id.to_string());
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(order_status(&pool, order_id).await, "cancelled");
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 10);

    let resp = post_empty(&app, &cancel).await;
    assert_api_error(resp, StatusCode::CONFLICT, "already_cancelled", None).await;
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 10);

    let order: Value = get(&app, &format!("/api/v1/orders/{order_id}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(order["status"], "cancelled");

    for path in [
        format!("/api/v1/orders/{}", Uuid::new_v4()),
        "/api/v1/orders/garbage".to_owned(),
    ] {
        assert_api_error(
            get(&app, &path).await,
            StatusCode::NOT_FOUND,
            "not_found",
            None,
        )
        .await;
    }
    let resp = post_empty(&app, &format!("/api/v1/orders/{}/cancel", Uuid::new_v4())).await;
    assert_api_error(resp, StatusCode::NOT_FOUND, "not_found", None).await;
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn api_rejects_invalid_order_fields_naming_the_field(pool: PgPool) {
    let (app, fixture) = app_with_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let valid = order_json(
        fixture.ticket_type_id(),
        1,
        "ada@example.org",
        "k-1-0123456789abcdef",
    );
    let changed = |name: &str, value: Value| {
        let mut body = valid.clone();
        body[name] = value;
        body
    };
    let removed = |name: &str| {
        let mut body = valid.clone();
        body.as_object_mut().unwrap().remove(name);
        body
    };

    let cases = [
        (changed("quantity", json!(0)), "quantity"),
        (changed("quantity", json!(-1)), "quantity"),
        (changed("quantity", json!(101)), "quantity"),
        (changed("quantity", json!("abc")), "quantity"),
        (changed("quantity", json!("1")), "quantity"),
        (changed("quantity", json!(1.5)), "quantity"),
        (
            changed("quantity", json!(99_999_999_999_999_999_999.0)),
            "quantity",
        ),
        (changed("quantity", Value::Null), "quantity"),
        (removed("quantity"), "quantity"),
        (removed("email"), "email"),
        (changed("email", json!("ada")), "email"),
        (changed("email", json!("ada@")), "email"),
        (changed("email", json!("")), "email"),
        (changed("email", json!(42)), "email"),
        (
            changed("ticket_type_id", json!("not-a-uuid")),
            "ticket_type_id",
        ),
        (removed("ticket_type_id"), "ticket_type_id"),
        (changed("idempotency_key", json!("")), "idempotency_key"),
        (
            changed("idempotency_key", json!("has space")),
            "idempotency_key",
        ),
        // Guessable or outside [A-Za-z0-9_-]: issue 7, item 9.
        (changed("idempotency_key", json!("1")), "idempotency_key"),
        (
            changed("idempotency_key", json!("fifteen-chars-x")),
            "idempotency_key",
        ),
        (
            changed("idempotency_key", json!("a.b:c.d:e.f:g.h:i.j")),
            "idempotency_key",
        ),
        (
            changed("idempotency_key", json!("k".repeat(201))),
            "idempotency_key",
        ),
        (removed("idempotency_key"), "idempotency_key"),
        (changed("surprise", json!(true)), "surprise"),
    ];
    for (body, field) in cases {
        let resp = post_json(&app, "/api/v1/orders", &body).await;
        assert_invalid(resp, field).await;
    }
    assert_books(&pool, fixture.ticket_type_id(), 0, 10).await;
}

#[sqlx::test]
async fn api_refuses_unknown_ticket_types_sold_out_not_enough_left_and_limits(pool: PgPool) {
    let fixture = published_event(
        &pool,
        &[
            TicketSpec::new(1, 1, 1),
            TicketSpec::new(5, 5, 5),
            TicketSpec::new(50, 2, 3),
        ],
    )
    .await;
    let app = TestApp::spawn(pool.clone()).await;
    let [tiny, small, limited] = fixture.ticket_type_ids[..] else {
        panic!("three ticket types")
    };
    api_buy(&app, tiny, 1, "first@example.org").await;
    api_buy(&app, small, 4, "first@example.org").await;
    api_buy(&app, limited, 2, "fan@example.org").await;
    let orders = order_count(&pool).await;
    assert_eq!(orders, 3);

    let order = |tt: Uuid, quantity: i64, email: &str| {
        order_json(tt, quantity, email, &Uuid::new_v4().to_string())
    };
    let cases = [
        (
            order(Uuid::new_v4(), 1, "b@example.org"),
            StatusCode::NOT_FOUND,
            "not_found",
            None,
        ),
        (
            order(tiny, 1, "b@example.org"),
            StatusCode::CONFLICT,
            "sold_out",
            None,
        ),
        (
            order(small, 2, "b@example.org"),
            StatusCode::CONFLICT,
            "not_enough_left",
            Some("quantity"),
        ),
        (
            order(limited, 3, "b@example.org"),
            StatusCode::CONFLICT,
            "limit_exceeded",
            Some("quantity"),
        ),
        (
            order(limited, 2, "fan@example.org"),
            StatusCode::CONFLICT,
            "limit_exceeded",
            Some("quantity"),
        ),
    ];
    for (body, status, code, field) in cases {
        let error = assert_api_error(
            post_json(&app, "/api/v1/orders", &body).await,
            status,
            code,
            field,
        )
        .await;
        if code == "not_enough_left" {
            assert_eq!(
                error["error"]["message"],
                "Only 1 left of this ticket type; choose fewer."
            );
        }
    }
    assert_books(&pool, tiny, orders, 0).await;
    assert_eq!(remaining(&pool, small).await, 1);
    assert_eq!(remaining(&pool, limited).await, 48);
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn api_order_before_the_sale_opens_is_forbidden(pool: PgPool) {
    let opens = OffsetDateTime::now_utc() + Span::days(1);
    let (app, fixture) = app_with_window(&pool, opens, None, &[TicketSpec::new(10, 4, 4)]).await;
    let resp = post_json(
        &app,
        "/api/v1/orders",
        &order_json(
            fixture.ticket_type_id(),
            1,
            "early@example.org",
            "early-0123456789abcdef",
        ),
    )
    .await;
    assert_api_error(resp, StatusCode::FORBIDDEN, "sale_not_open", None).await;
    assert_eq!(order_count(&pool).await, 0);
}

#[sqlx::test]
async fn api_rejects_malformed_json_and_wrong_content_type_with_400(pool: PgPool) {
    let (app, fixture) = app_with_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let valid = order_json(
        fixture.ticket_type_id(),
        1,
        "ada@example.org",
        "k-1-0123456789abcdef",
    )
    .to_string();

    let malformed = [
        "{\"ticket_type_id\": ".to_owned(),
        "{not json}".to_owned(),
        String::new(),
        format!("{valid} trailing"),
        // The order's fields as an array, in order: serde would read a
        // struct from it (found by the API fuzzer); a body is an object.
        format!(
            "[\"{}\", 1, \"ada@example.org\", \"k-1-0123456789abcdef\"]",
            fixture.ticket_type_id()
        ),
    ];
    for body in malformed {
        let resp = app
            .client
            .post(app.url("/api/v1/orders"))
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_api_error(resp, StatusCode::BAD_REQUEST, "invalid", None).await;
    }

    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        None,
    ] {
        let mut request = app
            .client
            .post(app.url("/api/v1/orders"))
            .body(valid.clone());
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        let resp = request.send().await.unwrap();
        assert_api_error(resp, StatusCode::BAD_REQUEST, "invalid", None).await;
    }

    let org = app.organizer("api@example.org").await;
    let resp = org
        .api(Method::POST, "/api/v1/organizer/events")
        .header("content-type", "text/plain")
        .body(api_event("Plain", None).to_string())
        .send()
        .await
        .unwrap();
    assert_api_error(resp, StatusCode::BAD_REQUEST, "invalid", None).await;

    assert_eq!(order_count(&pool).await, 0);
    assert_eq!(event_count(&pool).await, 1);
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn api_unknown_route_is_a_json_not_found(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    for path in ["/api/v1/nope", "/api/v2/events", "/api/v1/events/a/b"] {
        let resp = get(&app, path).await;
        assert_api_error(resp, StatusCode::NOT_FOUND, "not_found", None).await;
    }
    let resp = post_json(&app, "/api/v1/nothing/here", &json!({})).await;
    assert_api_error(resp, StatusCode::NOT_FOUND, "not_found", None).await;
}

#[sqlx::test]
async fn api_body_over_64_kib_is_refused_with_413(pool: PgPool) {
    let (app, fixture) = app_with_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let body = order_json(
        fixture.ticket_type_id(),
        1,
        "big@example.org",
        &"x".repeat(64 * 1024),
    );
    let mut event = api_event("Huge", Some("published"));
    event["description"] = json!("y".repeat(70 * 1024));
    let org = app.organizer("api@example.org").await;
    for resp in [
        post_json(&app, "/api/v1/orders", &body).await,
        api_create_event(&org, &event).await,
    ] {
        assert_api_error(
            resp,
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            None,
        )
        .await;
    }

    assert_eq!(order_count(&pool).await, 0);
    assert_eq!(event_count(&pool).await, 1);
    assert_invariants(&pool).await;
}

/// Purchases are rate limited per client address and per buyer email: past
/// the burst, 429 with the real wait in `Retry-After`, and nothing written.
#[sqlx::test]
async fn purchases_beyond_the_rate_limits_get_429_with_the_real_wait(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(100, 1, 100)]).await;
    let tt = fixture.ticket_type_id();
    let mut limits = stampede::web::Limits::default();
    limits.purchase_rates.per_email_burst = 2;
    limits.purchase_rates.per_ip_burst = 4;
    limits.purchase_rates.period = std::time::Duration::from_secs(30);
    let app = TestApp::spawn_with_limits(pool.clone(), limits).await;
    let buy = |email: &'static str| {
        let app = &app;
        async move {
            app.client
                .post(app.url("/api/v1/orders"))
                .json(&json!({
                    "ticket_type_id": tt,
                    "quantity": 1,
                    "email": email,
                    "idempotency_key": Uuid::new_v4().to_string(),
                }))
                .send()
                .await
                .unwrap()
        }
    };
    // One email: two, then refused.
    assert_eq!(buy("ada@example.org").await.status(), 201);
    assert_eq!(buy("ada@example.org").await.status(), 201);
    let refused = buy("ada@example.org").await;
    assert_eq!(refused.status(), 429);
    let wait: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=30).contains(&wait), "Retry-After {wait}");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limited", "{body}");
    // One address: four purchases counted (the refused one too), then refused
    // whatever the email.
    assert_eq!(buy("bob@example.org").await.status(), 201);
    let refused = buy("cy@example.org").await;
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().contains_key("retry-after"));

    assert_eq!(order_count(&pool).await, 3);
    assert_invariants(&pool).await;
}
