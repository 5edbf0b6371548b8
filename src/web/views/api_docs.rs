//! The API reference page (`GET /api/v1/docs`): every operation of the
//! OpenAPI document (method, path, summary, parameters, request and response
//! schemas) and every schema's fields, rendered from the document at run
//! time. Nothing is fetched from elsewhere; all text is escaped.

use maud::{Markup, html};
use serde_json::Value;

use super::PageContext;
use super::layout;

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

pub fn page(ctx: &PageContext, doc: &Value) -> Markup {
    let empty = serde_json::Map::new();
    let paths = doc["paths"].as_object().unwrap_or(&empty);
    let schemas = doc["components"]["schemas"].as_object().unwrap_or(&empty);
    layout(
        ctx,
        "API reference",
        html! {
            h1 { (text(&doc["info"]["title"])) " reference" }
            p { (text(&doc["info"]["description"])) }
            p {
                "The machine-readable document: "
                a href="/api/v1/openapi.json" { code { "/api/v1/openapi.json" } }
                " (OpenAPI " (text(&doc["openapi"])) "). API tokens are made on "
                a href="/organizer/settings" { "your settings page" } "."
            }
            h2 { "Operations" }
            table.events {
                thead { tr { th { "Method" } th { "Path" } th { "Summary" } } }
                tbody {
                    @for (path, method, op) in operations(paths) {
                        tr {
                            td { code { (method.to_uppercase()) } }
                            td { a href={ "#" (anchor(method, path)) } { code { (path) } } }
                            td { (text(&op["summary"])) }
                        }
                    }
                }
            }
            @for (path, method, op) in operations(paths) {
                section.card id=(anchor(method, path)) {
                    h2 { code { (method.to_uppercase()) " " (path) } }
                    p { strong { (text(&op["summary"])) } }
                    @if let Some(description) = op["description"].as_str() {
                        p { (description) }
                    }
                    @if op["security"].as_array().is_some_and(|s| !s.is_empty()) {
                        p.meta { "Needs " code { "Authorization: Bearer <token>" } "." }
                    }
                    @if let Some(params) = op["parameters"].as_array().filter(|p| !p.is_empty()) {
                        h3 { "Parameters" }
                        table.events {
                            thead { tr { th { "Name" } th { "In" } th { "Type" } th { "Description" } } }
                            tbody {
                                @for param in params {
                                    tr {
                                        td {
                                            code { (text(&param["name"])) }
                                            @if param["required"].as_bool() == Some(true) { " (required)" }
                                        }
                                        td { (text(&param["in"])) }
                                        td { (schema_label(&param["schema"])) }
                                        td { (text(&param["description"])) }
                                    }
                                }
                            }
                        }
                    }
                    @if let Some(content) = op["requestBody"]["content"].as_object() {
                        h3 { "Request body" }
                        @for (media, body) in content {
                            p { code { (media) } ": " (schema_label(&body["schema"])) }
                        }
                    }
                    h3 { "Responses" }
                    table.events {
                        thead { tr { th { "Status" } th { "Body" } th { "When" } } }
                        tbody {
                            @for (status, response) in op["responses"].as_object().unwrap_or(&empty) {
                                tr {
                                    td { (status) }
                                    td {
                                        @for body in response["content"].as_object().unwrap_or(&empty).values() {
                                            (schema_label(&body["schema"]))
                                        }
                                    }
                                    td { (text(&response["description"])) }
                                }
                            }
                        }
                    }
                }
            }
            h2 { "Schemas" }
            @for (name, schema) in schemas {
                section.card id={ "schema-" (name) } {
                    h3 { code { (name) } }
                    @if let Some(description) = schema["description"].as_str() {
                        p { (description) }
                    }
                    @if let Some(values) = schema["enum"].as_array() {
                        p { "One of: "
                            @for (i, value) in values.iter().enumerate() {
                                @if i > 0 { ", " }
                                code { (text(value)) }
                            }
                        }
                    }
                    @if let Some(properties) = schema["properties"].as_object() {
                        @let required = schema["required"].as_array();
                        @if schema["additionalProperties"] == Value::Bool(false) {
                            p.meta { "Unknown fields are refused." }
                        }
                        table.events {
                            thead { tr { th { "Field" } th { "Type" } th { "Description" } } }
                            tbody {
                                @for (field, property) in properties {
                                    tr {
                                        td {
                                            code { (field) }
                                            @if required.is_some_and(|r| r.iter().any(|f| f == field.as_str())) { " (required)" }
                                        }
                                        td { (schema_label(property)) }
                                        td { (text(&property["description"])) }
                                    }
                                }
                            }
                        }
                    } @else if schema.get("enum").is_none() {
                        p { (schema_label(schema)) }
                    }
                }
            }
        },
    )
}

/// `(path, method, operation)` in path order, then method order.
fn operations(paths: &serde_json::Map<String, Value>) -> Vec<(&str, &'static str, &Value)> {
    paths
        .iter()
        .flat_map(|(path, item)| {
            METHODS.iter().filter_map(move |method| {
                item.get(*method)
                    .map(|operation| (path.as_str(), *method, operation))
            })
        })
        .collect()
}

fn anchor(method: &str, path: &str) -> String {
    let slug: String = path
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("op-{method}{slug}")
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A schema in a few words: a component's name (linked), or its type.
fn schema_label(schema: &Value) -> Markup {
    if let Some(location) = schema["$ref"].as_str() {
        let name = location.rsplit('/').next().unwrap_or(location);
        return html! { a href={ "#schema-" (name) } { code { (name) } } };
    }
    if let Some(any) = schema["oneOf"]
        .as_array()
        .or_else(|| schema["anyOf"].as_array())
    {
        return html! {
            @for (i, option) in any.iter().enumerate() {
                @if i > 0 { " or " }
                (schema_label(option))
            }
        };
    }
    let types: Vec<String> = match &schema["type"] {
        Value::Array(types) => types.iter().map(text).collect(),
        Value::Null => Vec::new(),
        one => vec![text(one)],
    };
    let format = schema["format"].as_str();
    html! {
        @for (i, kind) in types.iter().enumerate() {
            @if i > 0 { " or " }
            @if kind == "array" {
                "array of " (schema_label(&schema["items"]))
            } @else {
                code { (kind) }
                @if let Some(format) = format.filter(|_| kind != "null") { " (" (format) ")" }
            }
        }
        @if types.is_empty() { "any" }
    }
}
