//! Who may reach which organizer route: without a session or a token, and
//! another organizer's events. Refusals are checked against the tables.

use std::collections::BTreeSet;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sqlx::PgPool;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::{
    common::{forms::*, organizer::*, *},
    http::support::*,
};

#[sqlx::test]
async fn every_organizer_page_without_a_session_redirects_to_log_in_and_writes_nothing(
    pool: PgPool,
) {
    let (app, fixture) = app_with_event(&pool, &[TicketSpec::new(10, 4, 8)]).await;
    // A real token id, so that a missing check could revoke something.
    let org = app.organizer("someone@example.org").await;
    let token = token_id(&pool, org.id, "tests").await;
    let event = fixture.event_id;
    let edit = edit_form(fixture.ticket_type_id(), "Taken over", "99");
    let new_event = new_event_form("Planted");

    // Every route under /organizer in src/web/mod.rs.
    let get_routes = [
        "/organizer".to_owned(),
        "/organizer/events/new".to_owned(),
        format!("/organizer/events/{event}"),
        format!("/organizer/events/{event}/edit"),
        format!("/organizer/events/{event}/orders.csv"),
        "/organizer/settings".to_owned(),
    ];
    let post_routes: Vec<(String, Vec<(String, String)>)> = vec![
        ("/organizer/events".to_owned(), new_event.clone()),
        (format!("/organizer/events/{event}/edit"), edit.clone()),
        (format!("/organizer/events/{event}/publish"), vec![]),
        (format!("/organizer/events/{event}/unpublish"), vec![]),
        (format!("/organizer/events/{event}/cancel"), vec![]),
        (
            "/organizer/settings/tokens".to_owned(),
            owned_fields(&[("name", "planted")]),
        ),
        (format!("/organizer/settings/tokens/{token}/revoke"), vec![]),
    ];

    let before = snapshot(&pool).await;
    // No session cookie at all, and a session cookie the store never issued.
    for session in [None, Some("not-a-session-id")] {
        for path in &get_routes {
            let mut request = app.client.get(app.url(path));
            if let Some(session) = session {
                request = request.header("cookie", format!("stampede_session={session}"));
            }
            let resp = request.send().await.unwrap();
            assert_eq!(resp.status(), StatusCode::SEE_OTHER, "GET {path}");
            assert_eq!(location(&resp), login_redirect(path), "GET {path}");
        }
        for (path, fields) in &post_routes {
            // A valid CSRF token: the session check alone must refuse.
            let cookies: Vec<(&str, &str)> = session
                .map(|s| ("stampede_session", s))
                .into_iter()
                .collect();
            let resp = post_with_cookies(&app, path, &borrowed(fields), &cookies).await;
            assert_eq!(resp.status(), StatusCode::SEE_OTHER, "POST {path}");
            assert_eq!(location(&resp), login_redirect(path), "POST {path}");
        }
    }
    assert_eq!(snapshot(&pool).await, before, "an anonymous request wrote");

    // The log-in page carries `next` on to the form.
    let resp = app
        .client
        .get(app.url(&login_redirect("/organizer/settings")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let body = resp.text().await.unwrap();
    assert!(
        body.contains("name=\"next\" value=\"/organizer/settings\""),
        "{body}"
    );
}

#[sqlx::test]
async fn every_organizer_api_route_refuses_a_missing_garbage_or_revoked_token_with_401_json(
    pool: PgPool,
) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("api@example.org").await;
    let revoked = create_token_on_page(&org, "old script").await;
    let revoked_id = token_id(&pool, org.id, "old script").await;
    let resp = org
        .post_form(
            &format!("/organizer/settings/tokens/{revoked_id}/revoke"),
            &[],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let body = json!({
        "title": "Unauthorized", "venue": "Nowhere",
        "starts_at": "2030-03-01T19:30:00Z", "sale_opens_at": "2020-01-01T10:00:00Z",
        "status": "published", "payment": "offline",
        "ticket_types": [{"name": "Standing", "price_minor": 100, "currency": "EUR", "capacity": 5}],
    });

    let lookalike = format!("stp_{}", "A".repeat(43));
    let authorizations = [
        None,
        Some(String::new()),
        Some("Bearer".to_owned()),
        Some("Bearer ".to_owned()),
        Some("Bearer garbage".to_owned()),
        Some(format!("Bearer {lookalike}")),
        Some(format!("Bearer {revoked}")),
        // The live token, but not as a bearer token.
        Some(org.api_token.clone()),
        Some(format!("Basic {}", org.api_token)),
        Some(format!("Token {}", org.api_token)),
    ];
    let before = snapshot(&pool).await;
    for authorization in &authorizations {
        for method in [Method::GET, Method::POST] {
            let mut request = app
                .client
                .request(method.clone(), app.url("/api/v1/organizer/events"))
                .json(&body);
            if let Some(authorization) = authorization {
                request = request.header("authorization", authorization);
            }
            let resp = request.send().await.unwrap();
            assert_unauthorized_json(resp, &format!("{method} with {authorization:?}")).await;
        }
    }
    assert_eq!(snapshot(&pool).await, before, "a refused API call wrote");
    assert_eq!(count(&pool, "SELECT count(*) FROM events").await, 0);

    // The organizer's live token is let through on both routes.
    let resp = org
        .api(Method::GET, "/api/v1/organizer/events")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let resp = org
        .api(Method::POST, "/api/v1/organizer/events")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
}

// ---------------------------------------------------------------------------
// Ownership
// ---------------------------------------------------------------------------

#[sqlx::test]
async fn another_organizer_gets_404_on_every_route_of_an_event_it_does_not_own_and_nothing_changes(
    pool: PgPool,
) {
    let app = TestApp::spawn(pool.clone()).await;
    let owner = app.organizer("owner@example.org").await;
    let intruder = app.organizer("intruder@example.org").await;
    let draft = owned_event(&owner, opened(), "draft", &[TicketSpec::new(10, 4, 8)]).await;
    let published = owned_event(&owner, opened(), "published", &[TicketSpec::new(10, 4, 8)]).await;
    api_buy(&app, published.ticket_type_id(), 2, "buyer@example.org").await;
    // Events of the fixture organizer (no password at all) are foreign too.
    let foreign = published_event(&pool, &[TicketSpec::new(10, 4, 8)]).await;

    let before = snapshot(&pool).await;
    for fixture in [&draft, &published, &foreign] {
        let event = fixture.event_id;
        for path in [
            format!("/organizer/events/{event}"),
            format!("/organizer/events/{event}/edit"),
            format!("/organizer/events/{event}/orders.csv"),
        ] {
            let resp = intruder.get(&path).await;
            assert_eq!(resp.status(), StatusCode::NOT_FOUND, "GET {path}");
            let body = resp.text().await.unwrap();
            assert!(!body.contains("buyer@example.org"), "GET {path}: {body}");
        }
        let edit = edit_form(fixture.ticket_type_id(), "Taken over", "99");
        for (path, fields) in [
            (format!("/organizer/events/{event}/edit"), edit),
            (format!("/organizer/events/{event}/publish"), vec![]),
            (format!("/organizer/events/{event}/unpublish"), vec![]),
            (format!("/organizer/events/{event}/cancel"), vec![]),
        ] {
            let resp = intruder.post_form(&path, &borrowed(&fields)).await;
            assert_eq!(resp.status(), StatusCode::NOT_FOUND, "POST {path}");
        }
    }
    assert_eq!(
        snapshot(&pool).await,
        before,
        "another organizer changed an event"
    );

    // Nor does the intruder see them listed, on the page or in the API.
    let overview = intruder.get("/organizer").await.text().await.unwrap();
    let listed: Value = list_own_events(&app, &intruder.api_token)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed["events"], json!([]), "{listed}");
    for fixture in [&draft, &published, &foreign] {
        assert!(
            !overview.contains(&fixture.event_id.to_string()),
            "{overview}"
        );
    }

    // The owner reaches the same routes.
    for fixture in [&draft, &published] {
        for path in [
            format!("/organizer/events/{}", fixture.event_id),
            format!("/organizer/events/{}/edit", fixture.event_id),
            format!("/organizer/events/{}/orders.csv", fixture.event_id),
        ] {
            assert_eq!(owner.get(&path).await.status(), StatusCode::OK, "{path}");
        }
    }
    let listed: Value = list_own_events(&app, &owner.api_token)
        .await
        .json()
        .await
        .unwrap();
    let ids: BTreeSet<&str> = listed["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    let expected: BTreeSet<String> = [draft.event_id, published.event_id]
        .iter()
        .map(Uuid::to_string)
        .collect();
    assert_eq!(
        ids,
        expected.iter().map(String::as_str).collect::<BTreeSet<_>>()
    );
}

#[sqlx::test]
async fn an_organizer_cannot_revoke_another_organizers_token(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let owner = app.organizer("owner@example.org").await;
    let intruder = app.organizer("intruder@example.org").await;
    let token = token_id(&pool, owner.id, "tests").await;

    let resp = intruder
        .post_form(&format!("/organizer/settings/tokens/{token}/revoke"), &[])
        .await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let revoked: Option<OffsetDateTime> = scalar(
        &pool,
        "SELECT revoked_at FROM api_tokens WHERE id = $1",
        token,
    )
    .await;
    assert_eq!(revoked, None);
    assert_eq!(
        list_own_events(&app, &owner.api_token).await.status(),
        StatusCode::OK
    );
    // The intruder's settings page does not list it either.
    let settings = intruder
        .get("/organizer/settings")
        .await
        .text()
        .await
        .unwrap();
    assert!(!settings.contains(&token.to_string()), "{settings}");
    assert!(!settings.contains(&owner.api_token[..10]), "{settings}");
}

// ---------------------------------------------------------------------------
