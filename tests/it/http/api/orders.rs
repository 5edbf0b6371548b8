//! Orders through the API: create, replay, read, cancel, refusals.

use super::*;

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
