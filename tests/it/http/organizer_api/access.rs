//! The token, the owner's scope, the field an error names, the rate limit.

use super::*;

#[sqlx::test]
async fn every_route_needs_a_token_and_hides_other_organizers_objects(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let owner = app.organizer("owner@example.org").await;
    let other = app.organizer("other@example.org").await;
    let fixture = owned_published_event(
        &owner,
        &[TicketSpec::new(10, 4, 4), TicketSpec::new(10, 4, 4)],
    )
    .await;
    let order_id = api_buy(&app, fixture.ticket_type_id(), 2, "buyer@example.org").await;
    // The owner's own token, revoked.
    let revoked = stampede::auth::create_token(&pool, owner.id.into(), "revoked")
        .await
        .unwrap();
    sqlx::query("UPDATE api_tokens SET revoked_at = now() WHERE name = 'revoked'")
        .execute(&pool)
        .await
        .unwrap();
    let before = tables(&pool).await;
    for (method, path, body) in routes(&fixture, order_id) {
        let mut anonymous = app.client.request(method.clone(), app.url(&path));
        if let Some(body) = &body {
            anonymous = anonymous.json(body);
        }
        let resp = anonymous.send().await.unwrap();
        assert_api_error(resp, StatusCode::UNAUTHORIZED, "unauthorized", None).await;
        for token in ["not-a-token", revoked.as_str()] {
            let mut wrong = app
                .client
                .request(method.clone(), app.url(&path))
                .bearer_auth(token);
            if let Some(body) = &body {
                wrong = wrong.json(body);
            }
            let resp = wrong.send().await.unwrap();
            assert_api_error(resp, StatusCode::UNAUTHORIZED, "unauthorized", None).await;
        }
        let resp = send(&other, method.clone(), &path, body.as_ref()).await;
        assert_api_error(resp, StatusCode::NOT_FOUND, "not_found", None).await;
        assert_eq!(tables(&pool).await, before, "{method} {path} wrote");
    }
    // The owner reaches each of them: after the event's cancel (fifth), the
    // writes on it answer 409 (`event_cancelled`, `already_cancelled`).
    for (method, path, body) in routes(&fixture, order_id) {
        let resp = send(&owner, method.clone(), &path, body.as_ref()).await;
        assert!(
            resp.status().is_success() || resp.status() == StatusCode::CONFLICT,
            "{method} {path}: {}",
            resp.status()
        );
    }
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn wrong_input_names_the_field_and_writes_nothing(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("fields@example.org").await;
    let fixture = owned_published_event(
        &org,
        &[TicketSpec::new(10, 4, 4), TicketSpec::new(10, 4, 4)],
    )
    .await;
    api_buy(&app, fixture.ticket_type_id(), 3, "buyer@example.org").await;
    let event = event_path(&fixture);
    let tt = fixture.ticket_type_ids[0];
    let before = tables(&pool).await;
    let cases: Vec<(Method, String, Value, &str)> = vec![
        (
            Method::PATCH,
            event.clone(),
            json!({"starts_at": "soon"}),
            "starts_at",
        ),
        (
            Method::PATCH,
            event.clone(),
            json!({"title": "  "}),
            "title",
        ),
        (
            Method::PATCH,
            event.clone(),
            json!({"colour": "red"}),
            "colour",
        ),
        (
            Method::PATCH,
            event.clone(),
            json!({"status": "published"}),
            "status",
        ),
        (Method::PATCH, event.clone(), json!({"title": 7}), "title"),
        (
            Method::PATCH,
            event.clone(),
            json!({"sale_opens_at": "2099-01-01T00:00:00Z"}),
            "sale_opens_at",
        ),
        (
            Method::PATCH,
            event.clone(),
            json!({"max_per_buyer": 0}),
            "max_per_buyer",
        ),
        (
            Method::PATCH,
            event.clone(),
            json!({"title": "New", "ticket_types": [{"id": Uuid::new_v4(), "capacity": 5}]}),
            "ticket_types[0].id",
        ),
        (
            Method::PATCH,
            event.clone(),
            json!({"title": "New", "ticket_types": [
                {"id": fixture.ticket_type_ids[1], "name": "Fine"},
                {"id": tt, "currency": "euro"}]}),
            "ticket_types[1].currency",
        ),
        (
            Method::PATCH,
            event.clone(),
            json!({"ticket_types": [{"id": tt, "price": 5}]}),
            "ticket_types[0].price",
        ),
        (
            Method::POST,
            format!("{event}/ticket-types"),
            json!({"price_minor": 100, "currency": "EUR", "capacity": 5}),
            "name",
        ),
        (
            Method::POST,
            format!("{event}/ticket-types"),
            json!({"name": "General admission 0", "price_minor": 100, "currency": "EUR",
                   "capacity": 5}),
            "name",
        ),
        (
            Method::POST,
            format!("{event}/ticket-types"),
            json!({"name": "Late", "price_minor": -1, "currency": "EUR", "capacity": 5}),
            "price_minor",
        ),
        (
            Method::PATCH,
            format!("{event}/ticket-types/{tt}"),
            json!({"capacity": -1}),
            "capacity",
        ),
        (
            Method::PATCH,
            format!("{event}/ticket-types/{tt}"),
            json!({"max_per_order": 5, "max_per_buyer": 4}),
            "max_per_buyer",
        ),
        (
            Method::PATCH,
            format!("{event}/ticket-types/{tt}"),
            json!({"remaining": 100}),
            "remaining",
        ),
    ];
    for (method, path, body, field) in cases {
        let resp = send(&org, method.clone(), &path, Some(&body)).await;
        assert_invalid(resp, field).await;
        assert_eq!(tables(&pool).await, before, "{method} {path} {body} wrote");
    }
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("status=refunded", "status"),
        ("modified_since=yesterday", "modified_since"),
        ("after=nonsense", "after"),
        ("page=2", "page"),
    ] {
        let resp = send(&org, Method::GET, &format!("{event}/orders?{query}"), None).await;
        assert_invalid(resp, field).await;
    }
    for (query, field) in [
        ("from=noon", "from"),
        ("from=2027-01-02T00:00:00Z&to=2027-01-01T00:00:00Z", "to"),
        ("from=2027-01-01T00:00:00Z&to=2027-01-03T00:00:00Z", "to"),
    ] {
        let resp = send(
            &org,
            Method::GET,
            &format!("{event}/stats/sales?{query}"),
            None,
        )
        .await;
        assert_invalid(resp, field).await;
    }
    // Malformed JSON is a 400; still nothing written.
    let resp = org
        .api(Method::PATCH, &event)
        .header("content-type", "application/json")
        .body("{\"title\": ")
        .send()
        .await
        .unwrap();
    assert_api_error(resp, StatusCode::BAD_REQUEST, "invalid", None).await;
    assert_eq!(tables(&pool).await, before);
}

#[sqlx::test]
async fn the_rate_limit_answers_429_with_retry_after_past_the_budget(pool: PgPool) {
    let limits = stampede::web::Limits {
        api_requests_per_minute: 3,
        ..stampede::web::Limits::default()
    };
    let app = TestApp::spawn_with_limits(pool.clone(), limits).await;
    let org = app.organizer("busy@example.org").await;
    let other = app.organizer("calm@example.org").await;
    for _ in 0..3 {
        let resp = send(&org, Method::GET, "/api/v1/organizer/events", None).await;
        assert_eq!(resp.status(), StatusCode::OK);
    }
    let resp = send(&org, Method::GET, "/api/v1/organizer/events", None).await;
    let retry_after: u64 = resp
        .headers()
        .get("retry-after")
        .expect("a Retry-After")
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    // One request per 20 s comes back: the wait is real, not a constant 1.
    assert!(
        (10..=20).contains(&retry_after),
        "Retry-After: {retry_after}"
    );
    assert_api_error(resp, StatusCode::TOO_MANY_REQUESTS, "rate_limited", None).await;
    // Per account: another organizer has a budget of its own.
    let resp = send(&other, Method::GET, "/api/v1/organizer/events", None).await;
    assert_eq!(resp.status(), StatusCode::OK);
}

#[sqlx::test]
async fn the_rate_limit_counts_per_account_whichever_token_is_used(pool: PgPool) {
    let limits = stampede::web::Limits {
        api_requests_per_minute: 3,
        ..stampede::web::Limits::default()
    };
    let app = TestApp::spawn_with_limits(pool.clone(), limits).await;
    let org = app.organizer("many-tokens@example.org").await;
    let second = create_token_on_page(&org, "second").await;
    let with_second = || {
        app.client
            .get(app.url("/api/v1/organizer/events"))
            .bearer_auth(&second)
            .send()
    };
    for _ in 0..2 {
        let resp = send(&org, Method::GET, "/api/v1/organizer/events", None).await;
        assert_eq!(resp.status(), StatusCode::OK);
    }
    assert_eq!(with_second().await.unwrap().status(), StatusCode::OK);
    // The account's three requests are spent: the second token has no
    // budget of its own.
    let resp = with_second().await.unwrap();
    assert_api_error(resp, StatusCode::TOO_MANY_REQUESTS, "rate_limited", None).await;
    let resp = send(&org, Method::GET, "/api/v1/organizer/events", None).await;
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
}

#[sqlx::test]
async fn an_account_holds_at_most_ten_live_tokens_even_when_created_at_once(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("hoarder@example.org").await;
    let live_sql = format!(
        "SELECT count(*) FROM api_tokens WHERE organizer_id = '{}' AND revoked_at IS NULL",
        org.id
    );
    let live = || count(&pool, &live_sql);
    assert_eq!(live().await, 1, "app.organizer made one");
    // Thirty creations at once, as the attack did: ten live, no more.
    let names: Vec<String> = (0..30).map(|i| format!("t{i}")).collect();
    let answers = futures::future::join_all(names.iter().map(|name| async {
        org.post_form("/organizer/settings/tokens", &[("name", name)])
            .await
    }))
    .await;
    let made = answers
        .iter()
        .filter(|r| r.status() == StatusCode::OK)
        .count();
    assert_eq!(
        made,
        9,
        "statuses: {:?}",
        answers.iter().map(|r| r.status()).collect::<Vec<_>>()
    );
    assert!(
        answers
            .iter()
            .all(|r| r.status() == StatusCode::OK || r.status() == StatusCode::UNPROCESSABLE_ENTITY)
    );
    assert_eq!(live().await, 10);
    let refused = org
        .post_form("/organizer/settings/tokens", &[("name", "one more")])
        .await;
    assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let page = refused.text().await.unwrap();
    assert!(page.contains("10 live API tokens"), "{page}");
    assert_eq!(live().await, 10);
    // Revoking one makes room again.
    let id: Uuid = sqlx::query_scalar(
        "SELECT id FROM api_tokens WHERE organizer_id = $1 AND name LIKE 't%' LIMIT 1",
    )
    .bind(org.id)
    .fetch_one(&pool)
    .await
    .unwrap();
    let resp = org
        .post_form(&format!("/organizer/settings/tokens/{id}/revoke"), &[])
        .await;
    assert!(resp.status().is_redirection(), "{}", resp.status());
    create_token_on_page(&org, "after a revoke").await;
    assert_eq!(live().await, 10);
}
