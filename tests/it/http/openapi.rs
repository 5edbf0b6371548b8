//! The OpenAPI document (`/api/v1/openapi.json`) against the router it
//! describes: every /api/v1 route and method the router serves is an
//! operation of the document and the other way round, so a route added
//! without its annotation fails here. Plus what the document promises
//! (bearer scheme, error shape, unknown fields refused) and the reference
//! page rendered from it.

use std::collections::BTreeSet;

use reqwest::{Method, StatusCode};
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

use crate::{common::*, http::support::*};

/// The routes the document does not describe: itself and its page.
const NOT_OPERATIONS: [&str; 2] = ["/api/v1/openapi.json", "/api/v1/docs"];

const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

/// The paths the router holds under /api/v1, read from its `Debug` form
/// (axum lists each route's path there; it has no other public listing).
fn router_api_paths(pool: &PgPool) -> BTreeSet<String> {
    let router = stampede::app(stampede::AppState::new(pool.clone()));
    let debug = format!("{router:?}");
    let paths: BTreeSet<String> = debug
        .split('"')
        .filter(|piece| piece.starts_with("/api/v1/") && !piece.contains(' '))
        .map(str::to_owned)
        .collect();
    assert!(
        paths.len() > 10,
        "the router's Debug form no longer lists its paths (axum changed?): {paths:?}"
    );
    paths
}

/// `/api/v1/events/{id}` with every parameter a fresh UUID.
fn concrete(path: &str) -> String {
    path.split('/')
        .map(|segment| {
            if segment.starts_with('{') {
                Uuid::new_v4().to_string()
            } else {
                segment.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

async fn document(app: &TestApp) -> Value {
    let resp = get(app, "/api/v1/openapi.json").await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    resp.json().await.unwrap()
}

#[sqlx::test]
async fn every_api_route_the_router_serves_is_in_the_openapi_document(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let doc = document(&app).await;
    let documented: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .filter(|key| METHODS.contains(&key.to_uppercase().as_str()))
                .map(move |method| (method.to_uppercase(), path.clone()))
        })
        .collect();

    // Which methods each route answers: anything but 405 (no token is
    // sent, so nothing is changed; the organizer routes answer 401).
    let mut served = BTreeSet::new();
    for path in router_api_paths(&pool) {
        if NOT_OPERATIONS.contains(&path.as_str()) {
            continue;
        }
        let url = app.url(&concrete(&path));
        for method in METHODS {
            let resp = app
                .client
                .request(Method::from_bytes(method.as_bytes()).unwrap(), &url)
                .send()
                .await
                .unwrap();
            if resp.status() != StatusCode::METHOD_NOT_ALLOWED {
                served.insert((method.to_owned(), path.clone()));
            }
        }
    }
    let undocumented: Vec<_> = served.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "routes without an operation in the OpenAPI document (annotate the handler with \
         #[utoipa::path] and list it in src/web/api/doc.rs): {undocumented:?}"
    );
    let unserved: Vec<_> = documented.difference(&served).collect();
    assert!(
        unserved.is_empty(),
        "operations in the document that no route serves: {unserved:?}"
    );
}

#[sqlx::test]
async fn the_document_is_openapi_3_1_with_the_bearer_scheme_and_the_error_shape(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let doc = document(&app).await;
    assert_eq!(doc["openapi"], "3.1.0");
    let scheme = &doc["components"]["securitySchemes"]["bearer"];
    assert_eq!(scheme["type"], "http");
    assert_eq!(scheme["scheme"], "bearer");

    let schemas = &doc["components"]["schemas"];
    let error = &schemas["ErrorBody"];
    assert_eq!(error["required"], serde_json::json!(["error"]));
    let detail = &schemas["ErrorDetail"]["properties"];
    for field in ["code", "message", "field"] {
        assert!(detail.get(field).is_some(), "ErrorDetail.{field}");
    }

    // Bodies whose unknown fields are refused say so.
    for body in [
        "CreateEvent",
        "CreateTicketType",
        "CreateOrder",
        "UpdateEvent",
        "UpdateTicketType",
        "UpdateTicketTypeRow",
        "RedeemRequest",
    ] {
        assert_eq!(
            schemas[body]["additionalProperties"],
            Value::Bool(false),
            "{body} refuses unknown fields, and the document says so"
        );
    }

    // Every organizer operation needs the token and lists its 401 and 429;
    // every operation lists the load shedder's 503.
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let responses = &op["responses"];
            assert!(responses.get("503").is_some(), "{method} {path}: 503");
            if path.starts_with("/api/v1/organizer/") {
                assert_eq!(
                    op["security"],
                    serde_json::json!([{"bearer": []}]),
                    "{method} {path}"
                );
                for status in ["401", "429"] {
                    assert!(responses.get(status).is_some(), "{method} {path}: {status}");
                }
                // Another organizer's event or order is "not found".
                if path.contains('{') {
                    assert!(responses.get("404").is_some(), "{method} {path}: 404");
                }
            } else {
                assert!(op.get("security").is_none(), "{method} {path} is public");
            }
        }
    }
    let list = &doc["paths"]["/api/v1/organizer/events/{id}/orders"]["get"]["parameters"];
    let names: BTreeSet<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        BTreeSet::from(["id", "limit", "after", "modified_since", "status", "email"])
    );
}

#[sqlx::test]
async fn an_api_error_has_the_shape_the_document_gives(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let resp = get(&app, &format!("/api/v1/events/{}", Uuid::new_v4())).await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let body: Value = resp.json().await.unwrap();
    let error = body["error"].as_object().unwrap();
    let keys: BTreeSet<&str> = error.keys().map(String::as_str).collect();
    assert_eq!(keys, BTreeSet::from(["code", "message", "field"]));
    assert_eq!(body["error"]["code"], "not_found");
    assert_eq!(body["error"]["field"], Value::Null);
}

#[sqlx::test]
async fn the_reference_page_lists_every_operation_from_the_document(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let doc = document(&app).await;
    let resp = get(&app, "/api/v1/docs").await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let html = resp.text().await.unwrap();
    let mut operations = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            operations += 1;
            let heading = format!("{} {}", method.to_uppercase(), path);
            assert!(html.contains(&heading), "the page lists {heading}");
            let summary = op["summary"].as_str().unwrap();
            assert!(!summary.is_empty(), "{heading} has a summary");
            assert!(html.contains(summary), "the page shows {heading}'s summary");
        }
    }
    assert!(operations >= 24, "{operations} operations");
    // Schema names, the parameters of a list, and nothing from elsewhere.
    for name in [
        "OrganizerEventBody",
        "ErrorBody",
        "modified_since",
        "code_prefix",
    ] {
        assert!(html.contains(name), "the page names {name}");
    }
    assert!(!html.contains("http://") && !html.contains("https://"));
    assert!(!html.contains("<script>"), "no inline script");
}
