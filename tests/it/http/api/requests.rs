//! Requests as such: bad JSON, unknown routes, big bodies, rate limits.

use super::*;

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
