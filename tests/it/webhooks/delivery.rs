//! Deliveries: retries on the schedule, disabling, refused addresses,
//! redirects and long answers.

use super::*;

#[sqlx::test]
async fn a_failing_receiver_is_retried_on_the_schedule_with_one_id_and_valid_signatures(
    pool: PgPool,
) {
    let app = app(&pool, true).await;
    let org = app.organizer("retry@example.com").await;
    let (addr, mut rx) = receiver(&[500, 503, 500]).await;
    let (endpoint, secret) =
        register(&org, &format!("http://{addr}/hook"), &["order.created"]).await;
    let event = owned_published_event(&org, &[TicketSpec::new(10, 2, 2)]).await;
    let worker = worker(&pool, true);
    let order = api_buy(&app, event.ticket_type_id(), 1, "buyer@example.com").await;
    let message = created_message(&pool, order).await;

    let mut got = Vec::new();
    for _ in 0..4 {
        got.push(next(&mut rx).await);
    }
    until(
        &pool,
        "SELECT status = 'succeeded' FROM webhook_deliveries WHERE endpoint_id = $1",
        endpoint,
    )
    .await;
    worker.abort();

    for received in &got {
        assert_eq!(
            received.id,
            message.to_string(),
            "same webhook-id every time"
        );
        assert!(verifies(&secret, received), "signature of {received:?}");
        let body = received.json();
        assert_eq!(body["type"], "order.created");
        assert_eq!(body["id"], message.to_string());
        assert_eq!(body["data"]["order_id"], order.to_string());
        assert_eq!(body["event_id"], event.event_id.to_string());
        // Ids and state, never a secret.
        let text = String::from_utf8_lossy(&received.body);
        assert!(
            !text.contains("cancel_secret") && !text.contains("whsec_"),
            "{text}"
        );
    }
    // The same message, signed again: a wrong secret does not verify.
    assert!(!verifies("whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", &got[0]));

    // The log: four attempts, three failures then success; the delay
    // chosen after failure n lies in the schedule's step n (5 ms base:
    // [0, 5], [5, 300], [300, 1800] ms), so they grow; the next attempt
    // came no sooner than its delay.
    let attempts: Vec<(Option<i32>, Option<i64>, time::OffsetDateTime)> = sqlx::query_as(
        "SELECT a.status_code, a.retry_in_ms, a.attempted_at FROM webhook_attempts a
         JOIN webhook_deliveries d ON d.id = a.delivery_id
         WHERE d.endpoint_id = $1 ORDER BY a.id",
    )
    .bind(endpoint)
    .fetch_all(&pool)
    .await
    .unwrap();
    let codes: Vec<Option<i32>> = attempts.iter().map(|a| a.0).collect();
    assert_eq!(codes, [Some(500), Some(503), Some(500), Some(200)]);
    let delays: Vec<i64> = attempts[..3].iter().map(|a| a.1.unwrap()).collect();
    assert!(attempts[3].1.is_none());
    for (delay, (low, high)) in delays.iter().zip([(0, 5), (5, 300), (300, 1800)]) {
        assert!((low..=high).contains(delay), "{delays:?}");
    }
    assert!(delays.windows(2).all(|w| w[0] <= w[1]), "{delays:?}");
    for (i, delay) in delays.iter().enumerate() {
        let gap = attempts[i + 1].2 - attempts[i].2;
        assert!(
            gap.whole_milliseconds() + 1 >= i128::from(*delay),
            "attempt {} came {gap} after its predecessor, before its delay {delay} ms",
            i + 2
        );
    }
    let endpoint_row: (bool, i64) = sqlx::query_as(
        "SELECT enabled, (SELECT attempts FROM webhook_deliveries WHERE endpoint_id = $1)::int8
         FROM webhook_endpoints WHERE id = $1",
    )
    .bind(endpoint)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(endpoint_row, (true, 4));

    // The metrics: the failed attempts, counted with no label naming the
    // endpoint (nor any other object); the depth.
    let metrics = scrape_metrics(&pool).await;
    assert!(
        metrics.contains("\nstampede_webhook_failures_total 3\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("stampede_webhook_queue_depth 0"),
        "{metrics}"
    );
    for id in [endpoint, event.event_id, event.ticket_type_id()] {
        assert!(!metrics.contains(&id.to_string()), "{id} in:\n{metrics}");
    }
    // And the site itself does not serve them.
    let site = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(site.status(), 404);
}

#[sqlx::test]
async fn failing_for_the_whole_window_fails_the_delivery_and_disables_the_endpoint(pool: PgPool) {
    let app = app(&pool, true).await;
    let org = app.organizer("down@example.com").await;
    let (addr, mut rx) = receiver(&[500; 1000]).await;
    let (endpoint, _) = register(&org, &format!("http://{addr}/hook"), &["order.created"]).await;
    let event = owned_published_event(&org, &[TicketSpec::new(10, 2, 2)]).await;
    let worker = worker(&pool, true);
    api_buy(&app, event.ticket_type_id(), 1, "buyer@example.com").await;
    next(&mut rx).await;
    // The first attempt "was" longer ago than the window (51,840 times the
    // 5 ms base, about 4.3 minutes): the next failure is the last.
    sqlx::query(
        "UPDATE webhook_deliveries SET first_attempt_at = now() - interval '1 hour'
         WHERE endpoint_id = $1",
    )
    .bind(endpoint)
    .execute(&pool)
    .await
    .unwrap();
    until(
        &pool,
        "SELECT status = 'failed' FROM webhook_deliveries WHERE endpoint_id = $1",
        endpoint,
    )
    .await;
    worker.abort();
    let (enabled, reason): (bool, Option<String>) =
        sqlx::query_as("SELECT enabled, disabled_reason FROM webhook_endpoints WHERE id = $1")
            .bind(endpoint)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(!enabled);
    let reason = reason.unwrap();
    assert!(reason.starts_with("Every attempt failed from"), "{reason}");
    let last_retry: Option<i64> = sqlx::query_scalar(
        "SELECT a.retry_in_ms FROM webhook_attempts a JOIN webhook_deliveries d
         ON d.id = a.delivery_id WHERE d.endpoint_id = $1 ORDER BY a.id DESC LIMIT 1",
    )
    .bind(endpoint)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(last_retry, None, "no retry follows the last attempt");
}

#[sqlx::test]
async fn a_receiver_answering_410_is_disabled_with_its_reason_and_gets_nothing_more(pool: PgPool) {
    let app = app(&pool, true).await;
    let org = app.organizer("gone@example.com").await;
    let (addr, mut rx) = receiver(&[410]).await;
    let (endpoint, _) = register(&org, &format!("http://{addr}/hook"), &["order.created"]).await;
    let event = owned_published_event(&org, &[TicketSpec::new(10, 2, 2)]).await;
    let worker = worker(&pool, true);
    api_buy(&app, event.ticket_type_id(), 1, "first@example.com").await;
    next(&mut rx).await;
    until(
        &pool,
        "SELECT NOT enabled FROM webhook_endpoints WHERE id = $1",
        endpoint,
    )
    .await;

    let second = api_buy(&app, event.ticket_type_id(), 1, "second@example.com").await;
    let message = created_message(&pool, second).await;
    until(
        &pool,
        "SELECT NOT EXISTS (SELECT 1 FROM outbox_behind('webhooks') WHERE id = $1)",
        message,
    )
    .await;
    settled(&pool, endpoint).await;
    worker.abort();

    assert!(
        rx.try_recv().is_err(),
        "a disabled endpoint got another request"
    );
    let (status, deliveries): (String, i64) = sqlx::query_as(
        "SELECT string_agg(status, ','), count(*) FROM webhook_deliveries WHERE endpoint_id = $1",
    )
    .bind(endpoint)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((status.as_str(), deliveries), ("failed", 1));
    let body: Value = org
        .api(
            Method::GET,
            &format!("/api/v1/organizer/webhooks/{endpoint}"),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["enabled"], false);
    assert!(
        body["disabled_reason"]
            .as_str()
            .unwrap()
            .contains("410 Gone"),
        "{body}"
    );
    // The endpoint's page shows the reason.
    let page = org
        .get(&format!("/organizer/settings/webhooks/{endpoint}"))
        .await
        .text()
        .await
        .unwrap();
    assert!(page.contains("410 Gone"), "{page}");
    assert!(page.contains("&lt;b&gt;nope&lt;/b&gt;"), "{page}");
    assert!(!page.contains("<b>nope</b>"), "{page}");
}

#[sqlx::test]
async fn private_addresses_are_refused_at_registration_and_at_delivery(pool: PgPool) {
    let app = app(&pool, false).await;
    let org = app.organizer("private@example.com").await;
    let (addr, mut rx) = receiver(&[]).await;
    for url in [
        format!("http://{addr}/hook"),
        format!("https://{addr}/hook"),
        format!("https://localhost:{}/hook", addr.port()),
        "https://[::1]/hook".to_owned(),
        "https://10.0.0.8/hook".to_owned(),
        "https://169.254.169.254/latest".to_owned(),
        "https://user:pw@example.com/hook".to_owned(),
        "ftp://example.com/hook".to_owned(),
    ] {
        let resp = org
            .api(Method::POST, "/api/v1/organizer/webhooks")
            .json(&json!({ "url": url, "event_types": ["order.created"] }))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY, "{url}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["field"], "url", "{url}: {body}");
    }
    // The page form too, filled in again with the error.
    let resp = org
        .post_form(
            "/organizer/settings/webhooks",
            &[
                ("url", &format!("https://localhost:{}/hook", addr.port())),
                ("description", "mine"),
                ("event_types", "order.created"),
            ],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let page = resp.text().await.unwrap();
    assert!(
        page.contains(&format!("value=\"https://localhost:{}/hook\"", addr.port())),
        "{page}"
    );
    assert!(page.contains("public addresses only"), "{page}");
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM webhook_endpoints")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(count, 0);

    // At delivery: endpoints whose host now leads to loopback (written
    // straight to the table, as if its DNS had changed since) are refused
    // after resolution, and nothing reaches the receiver.
    let mut endpoints = Vec::new();
    for url in [
        format!("https://localhost:{}/hook", addr.port()),
        format!("https://{addr}/hook"),
    ] {
        let id: Uuid = sqlx::query_scalar(
            "INSERT INTO webhook_endpoints (organizer_id, url, event_types, secret)
             VALUES ($1, $2, '{order.created}', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')
             RETURNING id",
        )
        .bind(org.id)
        .bind(url)
        .fetch_one(&pool)
        .await
        .unwrap();
        endpoints.push(id);
    }
    let event = owned_published_event(&org, &[TicketSpec::new(10, 2, 2)]).await;
    let worker = worker(&pool, false);
    api_buy(&app, event.ticket_type_id(), 1, "buyer@example.com").await;
    for endpoint in &endpoints {
        until(
            &pool,
            "SELECT EXISTS (SELECT 1 FROM webhook_attempts a JOIN webhook_deliveries d
                            ON d.id = a.delivery_id WHERE d.endpoint_id = $1)",
            *endpoint,
        )
        .await;
        let (error, code, excerpt): (Option<String>, Option<i32>, String) = sqlx::query_as(
            "SELECT a.error, a.status_code, a.response_excerpt FROM webhook_attempts a
             JOIN webhook_deliveries d ON d.id = a.delivery_id
             WHERE d.endpoint_id = $1 ORDER BY a.id LIMIT 1",
        )
        .bind(endpoint)
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(error.as_deref(), Some("refused_address"), "{excerpt}");
        assert_eq!(code, None);
    }
    worker.abort();
    assert!(rx.try_recv().is_err(), "a refused address was reached");
}

#[sqlx::test]
async fn redirects_are_not_followed_and_only_4_kib_of_an_answer_is_kept(pool: PgPool) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let followed = Arc::new(AtomicUsize::new(0));
    let counter = followed.clone();
    let receiver = Router::new()
        .route(
            "/redirect",
            post(|| async { (StatusCode::TEMPORARY_REDIRECT, [("location", "/target")]) }),
        )
        .route(
            "/target",
            post(move || {
                counter.fetch_add(1, Ordering::SeqCst);
                async { StatusCode::OK }
            }),
        )
        .route(
            "/big",
            post(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "é".repeat(50_000)) }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, receiver).await });

    let app = app(&pool, true).await;
    let org = app.organizer("odd@example.com").await;
    let (redirect, _) =
        register(&org, &format!("http://{addr}/redirect"), &["order.created"]).await;
    let (big, _) = register(&org, &format!("http://{addr}/big"), &["order.created"]).await;
    let event = owned_published_event(&org, &[TicketSpec::new(10, 2, 2)]).await;
    let worker = worker(&pool, true);
    api_buy(&app, event.ticket_type_id(), 1, "buyer@example.com").await;
    let first_attempt = |endpoint: Uuid| {
        let pool = pool.clone();
        async move {
            until(
                &pool,
                "SELECT EXISTS (SELECT 1 FROM webhook_attempts a JOIN webhook_deliveries d
                                ON d.id = a.delivery_id WHERE d.endpoint_id = $1)",
                endpoint,
            )
            .await;
            let row: (Option<i32>, String) = sqlx::query_as(
                "SELECT a.status_code, a.response_excerpt FROM webhook_attempts a
                 JOIN webhook_deliveries d ON d.id = a.delivery_id
                 WHERE d.endpoint_id = $1 ORDER BY a.id LIMIT 1",
            )
            .bind(endpoint)
            .fetch_one(&pool)
            .await
            .unwrap();
            row
        }
    };
    let (redirect_status, _) = first_attempt(redirect).await;
    let (big_status, excerpt) = first_attempt(big).await;
    worker.abort();

    assert_eq!(redirect_status, Some(307), "a redirect is a failed attempt");
    assert_eq!(
        followed.load(Ordering::SeqCst),
        0,
        "the redirect was followed"
    );
    assert_eq!(big_status, Some(500));
    // 4,096 bytes read, "é" is two: 2,048 of them.
    assert_eq!(excerpt, "é".repeat(2048));
}
