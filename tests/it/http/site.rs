//! Static files, security headers, the health check.

use reqwest::StatusCode;
use serde_json::Value;
use sqlx::PgPool;
use time::{Duration as Span, OffsetDateTime};

use crate::{common::*, http::support::*};

#[sqlx::test]
async fn static_assets_are_immutable_and_revalidate_with_their_etag(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    for (file, content_type, needle) in [
        ("style.css", "text/css", "{"),
        ("app.js", "text/javascript", "use strict"),
    ] {
        let resp = get(&app, &format!("/static/{file}")).await;
        assert_eq!(resp.status(), StatusCode::OK, "{file}");
        let headers = resp.headers().clone();
        let cache = headers["cache-control"].to_str().unwrap();
        assert!(cache.contains("immutable"), "{file}: {cache}");
        assert!(cache.contains("max-age=31536000"), "{file}: {cache}");
        assert!(
            headers["content-type"]
                .to_str()
                .unwrap()
                .starts_with(content_type),
            "{file}"
        );
        let etag = headers["etag"].to_str().unwrap().to_owned();
        assert!(
            etag.starts_with('"') && etag.ends_with('"') && etag.len() > 2,
            "{file}: {etag}"
        );
        assert!(resp.text().await.unwrap().contains(needle), "{file}");

        // Pages link the asset with the same hash as the ETag.
        let home = get(&app, "/").await.text().await.unwrap();
        assert!(
            home.contains(&format!("/static/{file}?v={}", etag.trim_matches('"'))),
            "{file}: {home}"
        );

        let resp = app
            .client
            .get(app.url(&format!("/static/{file}")))
            .header("if-none-match", &etag)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::NOT_MODIFIED, "{file}");
        assert_eq!(resp.headers()["etag"].to_str().unwrap(), etag);
        assert!(resp.text().await.unwrap().is_empty());

        let resp = app
            .client
            .get(app.url(&format!("/static/{file}")))
            .header("if-none-match", "\"0000000000000000\"")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "{file}");
    }
}

#[sqlx::test]
async fn unknown_static_asset_is_not_found(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    for path in [
        "/static/nope.css",
        "/static/..%2FCargo.toml",
        "/static/style.css.map",
    ] {
        let resp = get(&app, path).await;
        assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{path}");
        // A miss must never be cached like an asset.
        assert_eq!(resp.headers()["cache-control"], "no-store", "{path}");
    }
}

#[sqlx::test]
async fn responses_carry_security_headers(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let app = TestApp::spawn(pool).await;
    let org = app.organizer("org@example.org").await;
    let mut responses = Vec::new();
    for path in [
        "/".to_owned(),
        format!("/events/{}", fixture.event_id),
        "/organizer".to_owned(),
        "/api/v1/events".to_owned(),
        "/static/style.css".to_owned(),
        "/healthz".to_owned(),
        "/missing".to_owned(),
        "/api/v1/missing".to_owned(),
    ] {
        responses.push((path.clone(), get(&app, &path).await));
    }
    // Organizer pages as their organizer sees them (anonymous: a redirect).
    for path in ["/organizer", "/organizer/events/new", "/organizer/settings"] {
        let resp = org.get(path).await;
        assert_eq!(resp.status(), StatusCode::OK, "{path}");
        responses.push((format!("{path} (logged in)"), resp));
    }
    for (path, resp) in responses {
        let headers = resp.headers();
        let csp = headers
            .get("content-security-policy")
            .unwrap_or_else(|| panic!("{path}: no CSP"))
            .to_str()
            .unwrap();
        assert!(csp.contains("default-src 'self'"), "{path}: {csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(headers["x-frame-options"], "DENY", "{path}");
        assert_eq!(headers["referrer-policy"], "same-origin", "{path}");
        assert!(headers.contains_key("x-request-id"), "{path}");
    }
}

/// Pages and lists are gzipped for a client that asks, and carry the same
/// headers as ever; a client that does not ask gets them plain.
#[sqlx::test]
async fn pages_are_compressed_for_clients_that_ask(pool: PgPool) {
    use std::io::Read;
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let app = TestApp::spawn(pool).await;
    for path in [
        format!("/events/{}", fixture.event_id),
        "/api/v1/openapi.json".to_owned(),
    ] {
        let plain = get(&app, &path).await;
        assert_eq!(plain.status(), StatusCode::OK, "{path}");
        assert!(plain.headers().get("content-encoding").is_none(), "{path}");
        let plain = plain.bytes().await.unwrap();

        let resp = app
            .client
            .get(app.url(&path))
            .header("accept-encoding", "gzip")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "{path}");
        let headers = resp.headers().clone();
        assert_eq!(headers["content-encoding"], "gzip", "{path}");
        assert_eq!(headers["x-frame-options"], "DENY", "{path}");
        assert!(headers.contains_key("x-request-id"), "{path}");
        let gzipped = resp.bytes().await.unwrap();
        assert!(
            gzipped.len() < plain.len(),
            "{path}: {} bytes",
            gzipped.len()
        );
        let mut unzipped = Vec::new();
        flate2::read::GzDecoder::new(&gzipped[..])
            .read_to_end(&mut unzipped)
            .unwrap();
        let text = String::from_utf8(unzipped).unwrap();
        let plain = String::from_utf8(plain.to_vec()).unwrap();
        if path.ends_with(".json") {
            assert_eq!(text, plain, "{path}");
        } else {
            // Each page view has fresh form tokens of the same length.
            assert_eq!(text.len(), plain.len(), "{path}");
            assert!(text.starts_with("<!DOCTYPE html>"), "{path}");
            assert!(text.contains("<h1>Test concert</h1>"), "{path}");
            assert!(text.ends_with("</html>"), "{path}");
        }
    }
}

/// The same headers on the refusals made before any handler runs: too
/// large (413), too many log-ins (429) and shed (503).
#[sqlx::test]
async fn refusals_carry_security_headers_too(pool: PgPool) {
    let limits = stampede::web::Limits {
        login_burst: 1,
        login_period: std::time::Duration::from_secs(3600),
        ..stampede::web::Limits::default()
    };
    let addr = serve(stampede::AppState::new(pool.clone()).with_limits(limits)).await;
    let client = reqwest::Client::new();
    let too_large = client
        .post(format!("http://{addr}/api/v1/orders"))
        .header("content-type", "application/json")
        .body(vec![b' '; 128 * 1024])
        .send()
        .await
        .unwrap();
    let log_in = || {
        client
            .post(format!("http://{addr}/login"))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("cookie", csrf_cookie())
            .body(form_body(&[
                ("email", "ada@example.org"),
                ("password", "a wrong guess"),
            ]))
            .send()
    };
    assert_eq!(log_in().await.unwrap().status(), StatusCode::UNAUTHORIZED);
    let too_many = log_in().await.unwrap();
    // No budget at all: everything but /healthz is shed.
    let shed_limits = stampede::web::Limits {
        max_in_flight: 0,
        ..stampede::web::Limits::default()
    };
    let shed_addr = serve(stampede::AppState::new(pool).with_limits(shed_limits)).await;
    let shed = client
        .get(format!("http://{shed_addr}/"))
        .send()
        .await
        .unwrap();
    for (resp, status) in [
        (too_large, StatusCode::PAYLOAD_TOO_LARGE),
        (too_many, StatusCode::TOO_MANY_REQUESTS),
        (shed, StatusCode::SERVICE_UNAVAILABLE),
    ] {
        assert_eq!(resp.status(), status);
        let headers = resp.headers();
        let csp = headers["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("frame-ancestors 'none'"), "{status}: {csp}");
        assert_eq!(headers["x-content-type-options"], "nosniff", "{status}");
        assert_eq!(headers["x-frame-options"], "DENY", "{status}");
        assert_eq!(headers["referrer-policy"], "same-origin", "{status}");
    }
}

#[sqlx::test]
async fn health_check_answers_ok(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let resp = get(&app, "/healthz").await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.text().await.unwrap(), "ok");
}

#[sqlx::test]
async fn events_that_already_started_are_not_listed_for_buyers(pool: PgPool) {
    let upcoming = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    // Fixtures start 30 days after the sale opens: this one started 10 days ago.
    let past_opening = OffsetDateTime::now_utc() - Span::days(40);
    let past = event_with_window(
        &pool,
        past_opening,
        None,
        "published",
        &[TicketSpec::new(10, 4, 4)],
    )
    .await;
    let app = TestApp::spawn(pool.clone()).await;

    let home = get(&app, "/").await.text().await.unwrap();
    assert!(
        home.contains(&format!("/events/{}", upcoming.event_id)),
        "{home}"
    );
    assert!(
        !home.contains(&format!("/events/{}", past.event_id)),
        "{home}"
    );
    let listed: Value = get(&app, "/api/v1/events").await.json().await.unwrap();
    let ids: Vec<&str> = listed["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![upcoming.event_id.to_string()]);
}

#[sqlx::test]
async fn pages_with_order_codes_are_never_stored_by_caches(pool: PgPool) {
    let (app, fixture) = app_with_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let order_id = api_buy(&app, fixture.ticket_type_id(), 1, "ada@example.org").await;
    for path in [
        format!("/orders/{order_id}"),
        format!("/api/v1/orders/{order_id}"),
        format!("/events/{}", fixture.event_id),
    ] {
        let resp = get(&app, &path).await;
        assert_eq!(resp.status(), StatusCode::OK, "{path}");
        assert_eq!(resp.headers()["cache-control"], "no-store", "{path}");
    }
    let asset = get(&app, "/static/style.css").await;
    assert!(
        asset.headers()["cache-control"]
            .to_str()
            .unwrap()
            .contains("immutable")
    );
}

/// The metrics listener speaks Prometheus' text format: purchases by
/// outcome, batch sizes and per-route latency are there after a sale. A
/// made-up method is counted as `other`, not as a series of its own. The
/// site's own listener answers 404 on `/metrics`, and no label names the
/// event or its (hidden) ticket type.
#[sqlx::test]
async fn metrics_show_purchases_batches_and_route_latency(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let tt = fixture.ticket_type_id();
    // A hidden ticket type, sold with a presale code.
    sqlx::query("UPDATE ticket_types SET hidden = true WHERE id = $1")
        .bind(tt)
        .execute(&pool)
        .await
        .unwrap();
    let code = stampede::domain::CodeInput {
        code: "SECRET-ROOM".into(),
        max_uses: "4".into(),
        ticket_type_ids: vec![tt.to_string()],
        ..Default::default()
    };
    stampede::db::presale::create(
        &pool,
        fixture.organizer_id.into(),
        fixture.event_id.into(),
        &stampede::domain::Quotas::default(),
        &code.parse(&stampede::domain::Zone::utc()).unwrap(),
    )
    .await
    .unwrap();
    let app = TestApp::spawn(pool.clone()).await;
    let resp = app
        .client
        .post(app.url("/api/v1/orders"))
        .json(&serde_json::json!({
            "ticket_type_id": tt, "quantity": 1, "email": "ada@example.org",
            "idempotency_key": uuid::Uuid::new_v4().to_string(),
            "presale_code": "SECRET-ROOM",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let made_up = reqwest::Method::from_bytes(b"BREWCOFFEE").unwrap();
    let resp = app
        .client
        .request(made_up, app.url("/api/v1/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);

    // Not on the site's listener, from loopback or not.
    assert_eq!(get(&app, "/metrics").await.status(), StatusCode::NOT_FOUND);
    let metrics = serve_metrics(&pool).await;
    let resp = reqwest::get(format!("http://{metrics}/metrics"))
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let body = resp.text().await.unwrap();
    for series in [
        "stampede_purchases_total{outcome=\"created\"}",
        "stampede_batch_size_bucket{le=\"1\"}",
        "stampede_batch_queue_depth ",
        "stampede_http_request_duration_seconds_bucket{route=\"/api/v1/orders\",method=\"POST\",status=\"ok\",le=\"15\"}",
        "stampede_db_pool_connections{state=\"idle\"}",
        "stampede_http_request_duration_seconds_bucket{route=\"/api/v1/events\",method=\"other\",status=\"4xx\",le=\"15\"}",
    ] {
        assert!(body.contains(series), "{series} missing from:\n{body}");
    }
    assert!(!body.contains("BREWCOFFEE"), "{body}");
    for id in [tt, fixture.event_id] {
        assert!(!body.contains(&id.to_string()), "{id} in:\n{body}");
    }
    // The metrics listener serves nothing else.
    let other = reqwest::get(format!("http://{metrics}/healthz"))
        .await
        .unwrap();
    assert_eq!(other.status(), StatusCode::NOT_FOUND);
}
