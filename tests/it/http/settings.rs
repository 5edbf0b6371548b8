//! The settings page's markup: its tables are readable by a screen reader.

use reqwest::{Method, StatusCode};
use serde_json::json;
use sqlx::PgPool;

use crate::common::*;

#[sqlx::test]
async fn every_table_header_on_the_settings_page_has_a_name(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    // The organizer comes with an API token; an endpoint fills the
    // webhooks table too, so that both tables are on the page.
    let org = app.organizer("headers@example.org").await;
    let resp = org
        .api(Method::POST, "/api/v1/organizer/webhooks")
        .json(&json!({ "url": "https://example.com/hook", "event_types": ["order.created"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);

    let resp = org.get("/organizer/settings").await;
    assert_eq!(resp.status(), StatusCode::OK);
    let page = resp.text().await.unwrap();
    let headers = table_headers(&page);
    assert!(headers.contains(&"Last used".to_owned()), "{headers:?}");
    assert!(headers.contains(&"State".to_owned()), "{headers:?}");
    let empty = headers.iter().filter(|text| text.is_empty()).count();
    assert_eq!(empty, 0, "empty <th> on the settings page: {headers:?}");
}

/// The text of every `<th>` (tags inside dropped, spaces trimmed): what a
/// screen reader would name the column by.
fn table_headers(html: &str) -> Vec<String> {
    let mut headers = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find("<th") {
        rest = &rest[start + 3..];
        // `<thead>` starts with `<th` too.
        if !rest.starts_with(['>', ' ']) {
            continue;
        }
        let open_end = rest.find('>').expect("a closed <th> tag") + 1;
        let close = rest.find("</th>").expect("a </th>");
        let mut text = String::new();
        let mut in_tag = false;
        for c in rest[open_end..close].chars() {
            match c {
                '<' => in_tag = true,
                '>' => in_tag = false,
                c if !in_tag => text.push(c),
                _ => {}
            }
        }
        headers.push(text.trim().to_owned());
        rest = &rest[close..];
    }
    headers
}
