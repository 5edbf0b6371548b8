//! Issue 7, item 7: a NUL byte (or another control character) in organizer
//! text is a 422 naming the field, writes nothing, and the form comes back
//! filled in; Postgres never sees it.

use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::{
    common::{forms::*, organizer::*, *},
    http::support::*,
};

fn api_event(spoil: impl FnOnce(&mut Value)) -> Value {
    let mut body = json!({
        "title": "Night", "venue": "Hall", "description": "Doors at 7.\nBar open.",
        "starts_at": "2030-03-01T19:30:00Z", "sale_opens_at": "2020-01-01T10:00:00Z",
        "ticket_types": [{"name": "Standing", "price_minor": 100, "currency": "EUR", "capacity": 5}],
    });
    spoil(&mut body);
    body
}

#[sqlx::test]
async fn a_nul_byte_in_api_event_text_is_a_422_naming_the_field(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    type Spoil = fn(&mut Value);
    let cases: [(Spoil, &str); 5] = [
        (|b| b["title"] = json!("Ni\u{0}ght"), "title"),
        (|b| b["venue"] = json!("Hall\u{0}"), "venue"),
        (|b| b["description"] = json!("\u{0}"), "description"),
        (
            |b| b["ticket_types"][0]["name"] = json!("Stand\u{0}ing"),
            "ticket_types[0].name",
        ),
        (|b| b["title"] = json!("Bell\u{7}"), "title"),
    ];
    for (spoil, field) in cases {
        let resp = api_create_event(&org, &api_event(spoil)).await;
        assert_invalid(resp, field).await;
    }
    assert_eq!(event_count(&pool).await, 0);
    // Line breaks in a description are text, not control characters to refuse.
    let resp = api_create_event(&org, &api_event(|_| {})).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
}

#[sqlx::test]
async fn a_nul_byte_in_the_event_form_comes_back_filled_in(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    for name in ["title", "venue", "description", "tt_name_0"] {
        let fields = with(&new_event_form("Form concert"), name, "bad\u{0}text");
        let resp = org.post_form("/organizer/events", &borrowed(&fields)).await;
        assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY, "{name}");
        let body = resp.text().await.unwrap();
        assert_eq!(marked_invalid(&body), name, "{body}");
        assert!(body.contains("control character U+0000"), "{body}");
        // The rest of the form as typed.
        assert!(body.contains("Main hall") || name == "venue", "{body}");
        assert!(body.contains("value=\"120\""), "{body}");
    }
    assert_eq!(event_count(&pool).await, 0);
}

/// The name of the one form control marked `aria-invalid`.
fn marked_invalid(html: &str) -> &str {
    let at = html
        .find("aria-invalid=\"true\"")
        .expect("a control marked invalid");
    let tag = &html[html[..at].rfind('<').unwrap()..at];
    let start = tag.find("name=\"").unwrap() + 6;
    let len = tag[start..].find('"').unwrap();
    assert_eq!(html.matches("aria-invalid=\"true\"").count(), 1);
    &tag[start..start + len]
}

#[sqlx::test]
async fn a_nul_byte_in_a_token_name_is_a_422(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let before = count(&pool, "SELECT count(*) FROM api_tokens").await;
    let resp = org
        .post_form("/organizer/settings/tokens", &[("name", "ci\u{0}bot")])
        .await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        count(&pool, "SELECT count(*) FROM api_tokens").await,
        before
    );
}

#[sqlx::test]
async fn a_nul_byte_in_the_dashboard_search_is_a_422(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let event = owned_published_event(&org, &[TicketSpec::new(10, 4, 4)]).await;
    let path = format!("/organizer/events/{}", event.event_id);
    let resp = org.get(&format!("{path}?q=ada%00")).await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(resp.text().await.unwrap().contains("search"));
    assert_eq!(
        org.get(&format!("{path}?q=ada")).await.status(),
        StatusCode::OK
    );
}
