//! The JSON API's OpenAPI 3.1 document, generated from the code: the wire
//! types derive `utoipa::ToSchema`, each handler carries a
//! `#[utoipa::path(...)]` annotation, and [`ApiDoc`] lists the handlers.
//! Served at `GET /api/v1/openapi.json`; `GET /api/v1/docs` renders the same
//! document as a page (`views::api_docs`).
//!
//! tests/http/openapi.rs walks the router's /api/v1 routes and fails for a
//! route the document lacks (and for an operation no route serves).

// utoipa's `OpenApi` derive expands to paths the lint calls redundant.
#![allow(unused_qualifications)]

use std::sync::LazyLock;

use axum::{
    http::{HeaderValue, header},
    response::{Html, IntoResponse, Response},
};
use utoipa::{
    Modify, OpenApi, PartialSchema,
    openapi::{
        self, ContentBuilder, HeaderBuilder, Ref, RefOr, ResponseBuilder,
        security::{HttpAuthScheme, HttpBuilder, SecurityScheme},
    },
};

use crate::web::{error::ErrorBody, extract::PageContext, views};

/// The document. To document a new API route: annotate its handler with
/// `#[utoipa::path(...)]` (method, path, tag, summary, params, request_body,
/// responses, and `security(("bearer" = []))` behind the token) and add the
/// handler to `paths(...)` below: one line. The schemas its annotation names
/// are collected from it; the shared error answers (401, 429, 503, ...) are
/// added by [`CommonResponses`].
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Stampede API",
        version = "1",
        description = "Stampede's JSON API. The public part lists events and sells tickets; \
            the organizer part (`/api/v1/organizer/...`) needs an API token, created on the \
            organizer's settings page and sent as `Authorization: Bearer <token>`, and sees \
            only its owner's events (another organizer's are 404). Errors are \
            `{\"error\": {\"code\", \"message\", \"field\"}}` with a stable `code`. Times are \
            RFC 3339; amounts are in minor units with a currency; request bodies refuse \
            unknown fields; lists are paginated by an opaque `next` cursor.",
        license(name = "MIT"),
    ),
    paths(
        super::list_events,
        super::get_event,
        super::create_order,
        super::get_order,
        super::cancel_order,
        super::create_event,
        super::list_own_events,
        super::organizer::event::get_event,
        super::organizer::event::update_event,
        super::organizer::event::publish,
        super::organizer::event::unpublish,
        super::organizer::event::cancel_event,
        super::organizer::ticket_types::list_ticket_types,
        super::organizer::ticket_types::create_ticket_type,
        super::organizer::ticket_types::update_ticket_type,
        super::organizer::ticket_types::delete_ticket_type,
        super::pause::pause,
        super::pause::resume,
        super::organizer::orders::list_orders,
        super::organizer::orders::get_order,
        super::organizer::orders::cancel_order,
        super::organizer::orders::resend_tickets,
        super::organizer::stats::stats,
        super::organizer::stats::sales_per_minute,
        super::checkin::redeem,
        super::checkin::list_check_ins,
        super::checkin::search_tickets,
        super::presale::list,
        super::presale::create,
        super::waitlist::get_lists,
        super::waitlist::put_offers,
        super::waiting_room::get_room,
        super::waiting_room::put_room,
        crate::web::queue::api::api_join,
        crate::web::queue::api::api_position,
        crate::web::queue::api::api_challenge,
        super::webhooks::list,
        super::webhooks::create,
        super::webhooks::show,
        super::webhooks::update,
        super::webhooks::delete,
        super::webhooks::rotate_secret,
        super::webhooks::deliveries,
        super::webhooks::redeliver,
    ),
    components(schemas(ErrorBody)),
    modifiers(&CommonResponses),
    tags(
        (name = "public", description = "Events on sale, and buying tickets"),
        (name = "organizer", description = "Your events, ticket types, orders and sales (API token)"),
        (name = "check-in", description = "Redeeming tickets at the door (API token)"),
        (name = "webhooks", description = "Your webhook endpoints and their delivery log (API token)"),
    ),
)]
pub struct ApiDoc;

/// The answers every operation of a kind can give, added in one place
/// rather than on each annotation: the bearer scheme and its 401 and 429
/// (per-account rate limit) on the organizer operations, 413 and 408 where a
/// body is read, and the load shedder's 503 everywhere.
struct CommonResponses;

fn error_response(description: &str, retry_after: bool) -> RefOr<openapi::Response> {
    let mut response = ResponseBuilder::new().description(description).content(
        "application/json",
        ContentBuilder::new()
            .schema(Some(Ref::from_schema_name("ErrorBody")))
            .build(),
    );
    if retry_after {
        response = response.header(
            "Retry-After",
            HeaderBuilder::new()
                .schema(u64::schema())
                .description(Some("Seconds to wait before trying again"))
                .build(),
        );
    }
    RefOr::T(response.build())
}

impl Modify for CommonResponses {
    fn modify(&self, doc: &mut openapi::OpenApi) {
        doc.components
            .get_or_insert_with(Default::default)
            .add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An organizer's API token, from the settings page (/organizer/settings)",
                    ))
                    .build(),
            ),
        );
        for item in doc.paths.paths.values_mut() {
            let operations = [
                &mut item.get,
                &mut item.post,
                &mut item.put,
                &mut item.patch,
                &mut item.delete,
            ];
            for operation in operations.into_iter().flatten() {
                let responses = &mut operation.responses.responses;
                let mut add = |status: &str, response: RefOr<openapi::Response>| {
                    responses.entry(status.to_owned()).or_insert(response);
                };
                if operation.security.as_ref().is_some_and(|s| !s.is_empty()) {
                    add(
                        "401",
                        error_response("No token, or not a valid one (`unauthorized`)", false),
                    );
                    add(
                        "429",
                        error_response("This token's requests per minute are used up", true),
                    );
                }
                if operation.request_body.is_some() {
                    add(
                        "413",
                        error_response("The body is over 64 KiB (`payload_too_large`)", false),
                    );
                    add(
                        "408",
                        error_response("The body arrived too slowly (`request_timeout`)", false),
                    );
                }
                add(
                    "503",
                    error_response(
                        "Stampede is shedding load (`overloaded`); try again shortly",
                        true,
                    ),
                );
            }
        }
    }
}

/// The document, built once.
pub static DOCUMENT: LazyLock<openapi::OpenApi> = LazyLock::new(ApiDoc::openapi);

/// Its JSON, serialised once.
static JSON: LazyLock<String> = LazyLock::new(|| {
    DOCUMENT
        .to_pretty_json()
        .unwrap_or_else(|_| "{}".to_owned())
});

/// `GET /api/v1/openapi.json`.
pub async fn openapi_json() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        JSON.as_str(),
    )
        .into_response()
}

/// `GET /api/v1/docs`: the reference page, rendered from [`DOCUMENT`].
pub async fn reference_page(ctx: PageContext) -> Html<String> {
    Html(views::api_docs::page(&ctx, &VALUE).into_string())
}

/// The document as plain JSON, which the page walks.
static VALUE: LazyLock<serde_json::Value> =
    LazyLock::new(|| serde_json::to_value(&*DOCUMENT).unwrap_or_default());
