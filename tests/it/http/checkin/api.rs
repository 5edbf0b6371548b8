//! The check-in API: reason codes, and who may call it.

use super::*;

#[sqlx::test]
async fn the_api_answers_every_scan_with_a_stable_reason_code(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("api-door@example.org").await;
    let event = owned_published_event(&org, &[TicketSpec::new(10, 4, 8)]).await;
    let other = owned_published_event(&org, &[TicketSpec::new(10, 4, 8)]).await;
    let codes = bought_codes(&app, event.ticket_type_id(), 2, "guest@example.org").await;
    let elsewhere = bought_codes(&app, other.ticket_type_id(), 1, "guest@example.org").await;
    let (order, secret) =
        api_buy_with_secret(&app, event.ticket_type_id(), 1, "gone@example.org").await;
    let cancelled = ticket_codes(&pool, order).await;
    let resp = app
        .client
        .post(app.url(&format!("/api/v1/orders/{order}/cancel?s={secret}")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let id = event.event_id;

    let first = nonce();
    let ok = redeem_code(&org, id, &codes[0], "East", &first).await;
    assert_eq!(ok["result"], "ok", "{ok}");
    assert_eq!(ok["ticket_type"], "General admission 0");
    assert_eq!(ok["door"], "East");
    assert_eq!(ok["replayed"], false);
    let at = rfc3339(&ok["redeemed_at"]);

    let twice = redeem_code(&org, id, &codes[0], "West", &nonce()).await;
    assert_eq!(twice["result"], "already_redeemed", "{twice}");
    assert_eq!(twice["door"], "East");
    assert_eq!(rfc3339(&twice["redeemed_at"]), at);

    let retry = redeem_code(&org, id, &codes[0], "East", &first).await;
    assert_eq!(retry["result"], "ok", "{retry}");
    assert_eq!(retry["replayed"], true);
    assert_eq!(rfc3339(&retry["redeemed_at"]), at);

    let wrong = redeem_code(&org, id, &elsewhere[0], "East", &nonce()).await;
    assert_eq!(wrong["result"], "wrong_event", "{wrong}");
    assert!(
        wrong["ticket_type"].is_null(),
        "nothing of the other event: {wrong}"
    );
    assert_eq!(redeemed(&pool, &elsewhere[0]).await, (None, None));

    let refused = redeem_code(&org, id, &cancelled[0], "East", &nonce()).await;
    assert_eq!(refused["result"], "order_cancelled", "{refused}");
    assert_eq!(redeemed(&pool, &cancelled[0]).await, (None, None));

    let unknown = redeem_code(&org, id, "0000FFFF", "East", &nonce()).await;
    assert_eq!(unknown["result"], "unknown", "{unknown}");
    assert_eq!(redeemed_count(&pool).await, 1);

    // Bad requests are refused with the field named and write nothing.
    let scans = scan_count(&pool).await;
    let n = nonce();
    let cases = [
        (
            json!({"code": codes[1], "door": "East", "nonce": n, "extra": 1}),
            "extra",
        ),
        (json!({"code": codes[1], "door": "East"}), "nonce"),
        (
            json!({"code": codes[1], "door": "East", "nonce": "short"}),
            "nonce",
        ),
        (json!({"code": "12%34", "door": "East", "nonce": n}), "code"),
        (json!({"code": codes[1], "door": " ", "nonce": n}), "door"),
    ];
    for (body, field) in cases {
        assert_invalid(api_redeem(&org, id, &body).await, field).await;
    }
    let reused = api_redeem(
        &org,
        id,
        &json!({"code": codes[1], "door": "East", "nonce": first}),
    )
    .await;
    assert_api_error(
        reused,
        StatusCode::CONFLICT,
        "nonce_conflict",
        Some("nonce"),
    )
    .await;
    assert_eq!(scan_count(&pool).await, scans);
    assert_eq!(redeemed(&pool, &codes[1]).await, (None, None));

    // A cancelled event's tickets are all refused.
    let resp = org
        .post_form(&format!("/organizer/events/{id}/cancel"), &[])
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let after = redeem_code(&org, id, &codes[1], "East", &nonce()).await;
    assert_eq!(after["result"], "order_cancelled", "{after}");
    assert_eq!(redeemed(&pool, &codes[1]).await, (None, None));
}

#[sqlx::test]
async fn every_check_in_route_refuses_a_missing_token_another_organizer_and_a_dead_staff_link(
    pool: PgPool,
) {
    let app = TestApp::spawn(pool.clone()).await;
    let owner = app.organizer("owner@example.org").await;
    let intruder = app.organizer("intruder@example.org").await;
    let event = owned_published_event(&owner, &[TicketSpec::new(10, 4, 8)]).await;
    let code = bought_codes(&app, event.ticket_type_id(), 1, "guest@example.org").await[0].clone();
    let id = event.event_id;
    let now = app.clock.now();
    let secret = door_link(&owner, id, "Main", now).await;
    let link = door_link_id(&pool, &secret).await;
    let redeem_body = json!({"code": code, "door": "Main", "nonce": nonce()});
    let api_routes = [
        (
            Method::POST,
            format!("/api/v1/organizer/events/{id}/check-ins"),
        ),
        (
            Method::GET,
            format!("/api/v1/organizer/events/{id}/check-ins"),
        ),
        (
            Method::GET,
            format!(
                "/api/v1/organizer/events/{id}/tickets?code_prefix={}",
                &code[..4]
            ),
        ),
    ];
    let before = snapshot(&pool).await;

    // The API: no token is 401, another organizer's token 404.
    for (method, path) in &api_routes {
        let resp = app
            .client
            .request(method.clone(), app.url(path))
            .json(&redeem_body)
            .send()
            .await
            .unwrap();
        assert_unauthorized_json(resp, &format!("{method} {path}")).await;
        let resp = intruder
            .api(method.clone(), path)
            .json(&redeem_body)
            .send()
            .await
            .unwrap();
        assert_api_error(resp, StatusCode::NOT_FOUND, "not_found", None).await;
    }
    let resp = intruder
        .api(Method::GET, "/api/v1/organizer/events/not-an-id/check-ins")
        .send()
        .await
        .unwrap();
    assert_api_error(resp, StatusCode::NOT_FOUND, "not_found", None).await;

    // The dashboard's forms: no session goes to log in, another organizer
    // finds nothing.
    let create = format!("/organizer/events/{id}/door-links");
    let revoke = format!("/organizer/events/{id}/door-links/{link}/revoke");
    let fields = [
        ("door", "Side"),
        ("valid_from", &form_time(now)),
        ("valid_until", &form_time(now + Span::hours(2))),
    ];
    for path in [&create, &revoke] {
        let resp = app.post_form(path, &fields).await;
        assert_eq!(resp.status(), StatusCode::SEE_OTHER, "{path}");
        assert_eq!(location(&resp), login_redirect(path));
        let resp = intruder.post_form(path, &fields).await;
        assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{path}");
    }
    let resp = intruder
        .post_form(
            &format!(
                "/organizer/events/{}/door-links/{link}/revoke",
                Uuid::new_v4()
            ),
            &[],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    assert_eq!(snapshot(&pool).await, before, "a refused request wrote");

    // Links that are not (or no longer) live open nothing.
    let scanner = |s: String| {
        let app = &app;
        async move {
            app.client
                .get(app.url(&format!("/door?s={s}")))
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(scanner(secret.clone()).await, StatusCode::SEE_OTHER);
    for bad in ["", "short", &"A".repeat(43)] {
        assert_eq!(
            scanner(bad.to_owned()).await,
            StatusCode::NOT_FOUND,
            "{bad}"
        );
    }
    let resp = app.client.get(app.url("/door")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);

    // Expired, and not yet valid: by the app's clock.
    app.clock.set(now + Span::days(2));
    assert_eq!(scanner(secret.clone()).await, StatusCode::NOT_FOUND);
    let resp = door_scan(&app, &secret, &code, &nonce()).await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    app.clock.set(now - Span::hours(2));
    assert_eq!(scanner(secret.clone()).await, StatusCode::NOT_FOUND);
    app.clock.set(now);
    assert_eq!(redeemed_count(&pool).await, 0);

    // Revoked by its organizer: gone, and a second revoke finds nothing.
    let resp = owner.post_form(&revoke, &[]).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let dashboard = page(owner.get(&format!("/organizer/events/{id}")).await).await;
    assert!(dashboard.contains("revoked"), "{dashboard}");
    assert_eq!(scanner(secret.clone()).await, StatusCode::NOT_FOUND);
    let resp = door_scan(&app, &secret, &code, &nonce()).await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        owner.post_form(&revoke, &[]).await.status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(redeemed_count(&pool).await, 0);
    assert_eq!(scan_count(&pool).await, 0);
}
