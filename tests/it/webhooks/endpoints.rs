//! Endpoints: which messages go where, the API, redelivery and the
//! settings page.

use super::*;

#[sqlx::test]
async fn only_wanted_types_of_your_own_events_are_delivered(pool: PgPool) {
    let app = app(&pool, true).await;
    let alice = app.organizer("alice@example.com").await;
    let bob = app.organizer("bob@example.com").await;
    let (alice_addr, mut alice_rx) = receiver(&[]).await;
    let (bob_addr, mut bob_rx) = receiver(&[]).await;
    let (alice_hook, _) = register(
        &alice,
        &format!("http://{alice_addr}/hook"),
        &["order.cancelled"],
    )
    .await;
    let (bob_hook, _) =
        register(&bob, &format!("http://{bob_addr}/hook"), &["order.created"]).await;
    let alice_event = owned_published_event(&alice, &[TicketSpec::new(1, 1, 1)]).await;
    let bob_event = owned_published_event(&bob, &[TicketSpec::new(10, 2, 2)]).await;
    let worker = worker(&pool, true);

    // Alice's order sells her event out, then she cancels it: created,
    // sold out, cancelled, available again; she wants only cancellations.
    let alice_order = api_buy(&app, alice_event.ticket_type_id(), 1, "a@example.com").await;
    let resp = alice
        .api(
            Method::POST,
            &format!("/api/v1/organizer/orders/{alice_order}/cancel"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let bob_order = api_buy(&app, bob_event.ticket_type_id(), 1, "b@example.com").await;
    settled(&pool, alice_hook).await;
    settled(&pool, bob_hook).await;
    worker.abort();

    let drain = |rx: &mut mpsc::UnboundedReceiver<Received>| {
        let mut all = Vec::new();
        while let Ok(received) = rx.try_recv() {
            all.push(received.json());
        }
        all
    };
    let alice_got = drain(&mut alice_rx);
    let bob_got = drain(&mut bob_rx);
    let kinds = |got: &[Value]| -> Vec<(String, String)> {
        got.iter()
            .map(|m| {
                (
                    m["type"].as_str().unwrap().to_owned(),
                    m["data"]["order_id"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                )
            })
            .collect()
    };
    assert_eq!(
        kinds(&alice_got),
        [("order.cancelled".to_owned(), alice_order.to_string())]
    );
    assert_eq!(
        kinds(&bob_got),
        [("order.created".to_owned(), bob_order.to_string())]
    );
}

#[sqlx::test]
async fn the_webhook_api_is_owner_scoped_and_shows_the_secret_once(pool: PgPool) {
    let app = app(&pool, true).await;
    let alice = app.organizer("alice@example.com").await;
    let bob = app.organizer("bob@example.com").await;
    let (id, _) = register(&alice, "http://127.0.0.1:9/hook", &["order.created"]).await;
    let (second, _) = register(&alice, "http://127.0.0.1:9/other", &["event.cancelled"]).await;
    let one = format!("/api/v1/organizer/webhooks/{id}");
    let fake_delivery = Uuid::new_v4();

    // No token: 401 on every route.
    for (method, path) in [
        (Method::GET, "/api/v1/organizer/webhooks".to_owned()),
        (Method::POST, "/api/v1/organizer/webhooks".to_owned()),
        (Method::GET, one.clone()),
        (Method::PATCH, one.clone()),
        (Method::DELETE, one.clone()),
        (Method::GET, format!("{one}/deliveries")),
        (
            Method::POST,
            format!("{one}/deliveries/{fake_delivery}/redeliver"),
        ),
    ] {
        let resp = app
            .client
            .request(method.clone(), app.url(&path))
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "{method} {path}");
    }
    // Another organizer's token: 404, and nothing changes.
    for (method, path, body) in [
        (Method::GET, one.clone(), None),
        (
            Method::PATCH,
            one.clone(),
            Some(json!({ "enabled": false })),
        ),
        (Method::DELETE, one.clone(), None),
        (Method::POST, format!("{one}/rotate-secret"), None),
        (Method::GET, format!("{one}/deliveries"), None),
        (
            Method::POST,
            format!("{one}/deliveries/{fake_delivery}/redeliver"),
            None,
        ),
    ] {
        let mut request = bob.api(method.clone(), &path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let resp = request.send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{method} {path}");
    }
    let bob_list: Value = bob
        .api(Method::GET, "/api/v1/organizer/webhooks")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(bob_list["webhooks"], json!([]));

    // The secret is never shown again: not by GET, not in the list.
    let shown: Value = alice
        .api(Method::GET, &one)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(shown.get("secret").is_none(), "{shown}");
    assert_eq!(shown["enabled"], true);
    let page: Value = alice
        .api(Method::GET, "/api/v1/organizer/webhooks?limit=1")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(page["webhooks"].as_array().unwrap().len(), 1);
    assert!(page["webhooks"][0].get("secret").is_none(), "{page}");
    let next = page["next"].as_str().unwrap();
    let rest: Value = alice
        .api(
            Method::GET,
            &format!("/api/v1/organizer/webhooks?limit=1&after={next}"),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(rest["webhooks"][0]["id"], second.to_string());
    assert!(rest["next"].is_null(), "{rest}");

    // PATCH changes what it names; unknown fields and bad types refused.
    let resp = alice
        .api(Method::PATCH, &one)
        .json(&json!({ "enabled": false, "event_types": ["order.cancelled", "order.created"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let patched: Value = resp.json().await.unwrap();
    assert_eq!(patched["enabled"], false);
    assert_eq!(
        patched["event_types"],
        json!(["order.created", "order.cancelled"])
    );
    assert_eq!(patched["disabled_reason"], "Disabled by the organizer.");
    let resp = alice
        .api(Method::PATCH, &one)
        .json(&json!({ "secret": "whsec_mine" }))
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_client_error(), "{}", resp.status());
    let resp = alice
        .api(Method::PATCH, &one)
        .json(&json!({ "event_types": ["order.updated"] }))
        .send()
        .await
        .unwrap();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["field"], "event_types", "{body}");

    // Rotation shows a new secret once; delete is 204 then 404.
    let rotated: Value = alice
        .api(Method::POST, &format!("{one}/rotate-secret"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(rotated["secret"].as_str().unwrap().starts_with("whsec_"));
    let resp = alice.api(Method::DELETE, &one).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let resp = alice.api(Method::GET, &one).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
}

#[sqlx::test]
async fn redeliver_sends_the_same_webhook_id_again(pool: PgPool) {
    let app = app(&pool, true).await;
    let org = app.organizer("again@example.com").await;
    let (addr, mut rx) = receiver(&[]).await;
    let (endpoint, secret) =
        register(&org, &format!("http://{addr}/hook"), &["order.created"]).await;
    let event = owned_published_event(&org, &[TicketSpec::new(10, 2, 2)]).await;
    let worker = worker(&pool, true);
    let order = api_buy(&app, event.ticket_type_id(), 1, "buyer@example.com").await;
    let message = created_message(&pool, order).await;
    let first = next(&mut rx).await;
    settled(&pool, endpoint).await;

    let log: Value = org
        .api(
            Method::GET,
            &format!("/api/v1/organizer/webhooks/{endpoint}/deliveries"),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let delivery = log["deliveries"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(log["deliveries"][0]["status"], "succeeded");
    assert_eq!(log["deliveries"][0]["webhook_id"], message.to_string());
    assert_eq!(log["deliveries"][0]["log"][0]["status_code"], 200);

    // Through the API...
    let resp = org
        .api(
            Method::POST,
            &format!("/api/v1/organizer/webhooks/{endpoint}/deliveries/{delivery}/redeliver"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let second = next(&mut rx).await;
    // ...and through the endpoint page's button (CSRF-protected).
    settled(&pool, endpoint).await;
    let page = org
        .get(&format!("/organizer/settings/webhooks/{endpoint}"))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("Redeliver") && page.contains(&message.to_string()),
        "{page}"
    );
    let path = format!("/organizer/settings/webhooks/{endpoint}/deliveries/{delivery}/redeliver");
    let forged = app.client.post(app.url(&path)).send().await.unwrap();
    assert!(forged.status().is_client_error(), "{}", forged.status());
    let resp = org.post_form(&path, &[]).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let third = next(&mut rx).await;
    settled(&pool, endpoint).await;
    worker.abort();

    for received in [&first, &second, &third] {
        assert_eq!(received.id, message.to_string());
        assert!(verifies(&secret, received));
        assert_eq!(received.body, first.body);
    }
    let attempts: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
         WHERE d.endpoint_id = $1",
    )
    .bind(endpoint)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(attempts, 3);
}

#[sqlx::test]
async fn the_settings_page_adds_an_endpoint_and_shows_its_secret_once(pool: PgPool) {
    let app = app(&pool, true).await;
    let org = app.organizer("page@example.com").await;
    // Bad input comes back filled in, naming the field.
    let resp = org
        .post_form(
            "/organizer/settings/webhooks",
            &[
                ("url", "http://127.0.0.1:9/hook"),
                ("description", "<b>CRM</b>"),
            ],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let page = resp.text().await.unwrap();
    assert!(page.contains("Choose at least one event type."), "{page}");
    assert!(page.contains("value=\"http://127.0.0.1:9/hook\""), "{page}");
    assert!(page.contains("&lt;b&gt;CRM&lt;/b&gt;") && !page.contains("<b>CRM</b>"));

    let resp = org
        .post_form(
            "/organizer/settings/webhooks",
            &[
                ("url", "http://127.0.0.1:9/hook"),
                ("description", "CRM"),
                ("event_types", "order.created"),
                ("event_types", "event.cancelled"),
            ],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let page = resp.text().await.unwrap();
    let secret: String = sqlx::query_scalar("SELECT secret FROM webhook_endpoints")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(page.contains(&secret), "the new secret is shown");
    let again = org.get("/organizer/settings").await.text().await.unwrap();
    assert!(again.contains("http://127.0.0.1:9/hook"));
    assert!(again.contains("order.created, event.cancelled"));
    assert!(!again.contains(&secret), "the secret is shown once only");
    // A forged form (no CSRF field) changes nothing.
    let forged = app
        .client
        .post(app.url("/organizer/settings/webhooks"))
        .form(&[
            ("url", "http://127.0.0.1:9/x"),
            ("event_types", "order.created"),
        ])
        .send()
        .await
        .unwrap();
    assert!(forged.status().is_client_error());
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM webhook_endpoints")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(count, 1);
}

/// The cap on endpoints holds when the creations come at once: the
/// organizer's row is locked before the count, so each counts the others.
#[sqlx::test]
async fn twenty_endpoints_at_most_even_when_created_at_once(
    _: sqlx::postgres::PgPoolOptions,
    connect: sqlx::postgres::PgConnectOptions,
) {
    let pool = common::pool(connect, 12).await;
    let organizer = common::fixture_organizer(&pool).await;
    let new = |i: usize| stampede::db::webhooks::NewEndpoint {
        url: format!("https://hooks{i}.example.org/in"),
        description: String::new(),
        event_types: vec!["order.created".to_owned()],
    };
    for i in 0..15 {
        stampede::db::webhooks::create(&pool, organizer.into(), &new(i), "whsec_x")
            .await
            .unwrap();
    }
    let created =
        futures::future::join_all(
            (15..25).map(|i| {
                let (pool, new) = (pool.clone(), new(i));
                async move {
                    stampede::db::webhooks::create(&pool, organizer.into(), &new, "whsec_x").await
                }
            }),
        )
        .await;
    let made = created.iter().filter(|r| r.is_ok()).count();
    assert_eq!(made, 5, "{created:?}");
    assert!(created.iter().all(|r| match r {
        Ok(_) => true,
        Err(stampede::error::AppError::Invalid(invalid)) => invalid.field == "url",
        Err(_) => false,
    }));
    let stored: i64 =
        sqlx::query_scalar("SELECT count(*) FROM webhook_endpoints WHERE organizer_id = $1")
            .bind(organizer)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(stored, 20);
}

/// The fan-out reads a backlog a few rows at a time (by their places in
/// the log, not their payloads): across its rounds every `order.created`
/// gets exactly one delivery, and a round past the end does nothing.
#[sqlx::test]
async fn a_backlog_fanned_out_a_few_rows_at_a_time_gets_one_delivery_per_message(pool: PgPool) {
    let app = app(&pool, true).await;
    let org = app.organizer("carol@example.com").await;
    let (hook, _) = register(&org, "http://127.0.0.1:9/hook", &["order.created"]).await;
    let event = owned_published_event(&org, &[TicketSpec::new(50, 1, 1)]).await;
    let mut orders = Vec::new();
    for i in 0..11 {
        orders.push(
            api_buy(
                &app,
                event.ticket_type_id(),
                1,
                &format!("f{i}@example.com"),
            )
            .await,
        );
    }
    // Rounds until nothing is behind. A round reads only rows below every
    // running transaction (the outbox's horizon), and another test's
    // transaction on this Postgres can hold that back for a while: a round
    // that reads nothing then waits and tries again (bounded).
    let behind = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM outbox_behind('webhooks')")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    let mut rounds = 0;
    for _ in 0..400 {
        let (rows, _) = stampede::db::webhooks::fan_out(&pool, 3).await.unwrap();
        assert!(rows <= 3, "a round read {rows} rows, past its limit");
        if rows > 0 {
            rounds += 1;
        } else if behind().await == 0 {
            break;
        } else {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    assert_eq!(behind().await, 0, "the fan-out never reached the end");
    assert!(
        rounds >= 4,
        "11 orders and more fanned out in {rounds} rounds"
    );
    let mut delivered: Vec<Uuid> = sqlx::query_scalar(
        "SELECT o.order_id FROM webhook_deliveries d JOIN outbox o ON o.id = d.message_id
         WHERE d.endpoint_id = $1",
    )
    .bind(hook)
    .fetch_all(&pool)
    .await
    .unwrap();
    delivered.sort();
    orders.sort();
    assert_eq!(delivered, orders, "one delivery per order.created");
}
