//! The webhooks section of the settings page and an endpoint's page with
//! its delivery log. Everything a receiver sent back is text, escaped.

use maud::{Markup, html};

use super::{FormError, PageContext, csrf_field, error_notice, format_time, invalid, layout};
use crate::{
    db::webhooks::{Delivery, Endpoint},
    domain::{MAX_WEBHOOK_DESCRIPTION_CHARS, MAX_WEBHOOK_URL_CHARS, WEBHOOK_EVENT_TYPES},
};

/// What the new-endpoint form keeps when it comes back.
#[derive(Debug, Clone, Default)]
pub struct WebhookForm {
    pub url: String,
    pub description: String,
    pub event_types: Vec<String>,
    pub error: Option<FormError>,
}

/// A secret to show once, for the endpoint it belongs to.
#[derive(Debug, Clone)]
pub struct NewSecret {
    pub url: String,
    pub secret: String,
}

fn secret_notice(new: Option<&NewSecret>) -> Markup {
    html! {
        @if let Some(new) = new {
            div.notice.success role="status" {
                p { strong { "The signing secret of " (new.url) " — copy it now, it will not be shown again:" } }
                p { code.token #webhook-secret { (new.secret) } }
            }
        }
    }
}

fn state_badge(endpoint: &Endpoint) -> Markup {
    html! {
        @if endpoint.enabled {
            span.badge.confirmed { "enabled" }
        } @else {
            span.badge.cancelled { "disabled" }
        }
    }
}

/// The settings page's section: the endpoints and the form for a new one.
pub fn section(
    ctx: &PageContext,
    endpoints: &[Endpoint],
    form: &WebhookForm,
    new_secret: Option<&NewSecret>,
) -> Markup {
    let error = form.error.as_ref();
    html! {
        section.card #webhooks {
            h2 { "Webhooks" }
            p { "Stampede POSTs each order change to your endpoints, signed per "
                a href="https://www.standardwebhooks.com" { "Standard Webhooks" } ". See the Webhooks section of docs/organizer-api.md to verify them." }
            (secret_notice(new_secret))
            @if !endpoints.is_empty() {
                table.events {
                    thead { tr { th { "URL" } th { "Events" } th { "State" } th { span.visually-hidden { "Actions" } } } }
                    tbody {
                        @for endpoint in endpoints {
                            tr {
                                td {
                                    code { (endpoint.url) }
                                    @if !endpoint.description.is_empty() { br; small { (endpoint.description) } }
                                }
                                td { (endpoint.event_types.join(", ")) }
                                td {
                                    (state_badge(endpoint))
                                    @if let Some(reason) = &endpoint.disabled_reason { br; small { (reason) } }
                                }
                                td { a href={ "/organizer/settings/webhooks/" (endpoint.id) } { "Deliveries" } }
                            }
                        }
                    }
                }
            }
            h3 { "Add an endpoint" }
            form method="post" action="/organizer/settings/webhooks" data-once {
                (csrf_field(ctx))
                (error_notice(error))
                label for="webhook-url" { "URL (https)" }
                input #webhook-url name="url" type="url" required maxlength=(MAX_WEBHOOK_URL_CHARS)
                    placeholder="https://example.com/stampede" value=(form.url)
                    aria-invalid=[invalid(error, "url")];
                label for="webhook-description" { "Description (optional)" }
                input #webhook-description name="description" maxlength=(MAX_WEBHOOK_DESCRIPTION_CHARS)
                    value=(form.description) aria-invalid=[invalid(error, "description")];
                fieldset aria-invalid=[invalid(error, "event_types")] {
                    legend { "Events" }
                    @for kind in WEBHOOK_EVENT_TYPES {
                        label {
                            input type="checkbox" name="event_types" value=(kind)
                                checked[form.event_types.iter().any(|k| k == kind)];
                            " " code { (kind) }
                        }
                    }
                }
                button type="submit" { "Add endpoint" }
            }
        }
    }
}

/// An endpoint's page: its settings, buttons, and its recent deliveries
/// with every attempt.
pub fn endpoint_page(
    ctx: &PageContext,
    endpoint: &Endpoint,
    deliveries: &[Delivery],
    new_secret: Option<&NewSecret>,
) -> Markup {
    let base = format!("/organizer/settings/webhooks/{}", endpoint.id);
    layout(
        ctx,
        "Webhook endpoint",
        html! {
            p { a href="/organizer/settings#webhooks" { "← Settings" } }
            h1 { "Webhook endpoint" }
            section.card {
                (secret_notice(new_secret))
                p { code { (endpoint.url) } " " (state_badge(endpoint)) }
                @if !endpoint.description.is_empty() { p { (endpoint.description) } }
                p { "Events: " (endpoint.event_types.join(", ")) }
                @if let Some(reason) = &endpoint.disabled_reason {
                    p.notice.error #disabled-reason { "Disabled: " (reason) }
                }
                p { "Last success: "
                    @if let Some(at) = endpoint.last_success_at { (format_time(at)) } @else { "never" } }
                div.actions {
                    @if endpoint.enabled {
                        form method="post" action={ (base) "/disable" } data-once {
                            (csrf_field(ctx))
                            button.small type="submit" { "Disable" }
                        }
                    } @else {
                        form method="post" action={ (base) "/enable" } data-once {
                            (csrf_field(ctx))
                            button.small type="submit" { "Enable" }
                        }
                    }
                    form method="post" action={ (base) "/rotate-secret" } data-once
                        data-confirm="Make a new secret? The current one stops working at once." {
                        (csrf_field(ctx))
                        button.small type="submit" { "Rotate secret" }
                    }
                    form method="post" action={ (base) "/delete" } data-once
                        data-confirm="Delete this endpoint and its delivery log?" {
                        (csrf_field(ctx))
                        button.danger.small type="submit" { "Delete" }
                    }
                }
            }
            section.card {
                h2 { "Recent deliveries" }
                @if deliveries.is_empty() {
                    p { "Nothing delivered yet." }
                } @else {
                    table.events #deliveries {
                        thead { tr { th { "Message" } th { "Status" } th { "Attempts" } th { span.visually-hidden { "Actions" } } } }
                        tbody {
                            @for delivery in deliveries {
                                tr {
                                    td { code { (delivery.kind) } br; small { code { (delivery.message_id) } } br; small { (format_time(delivery.created_at)) } }
                                    td {
                                        (delivery.status)
                                        @if delivery.status == "pending" {
                                            @if let Some(at) = delivery.next_attempt_at { br; small { "next " (format_time(at)) } }
                                        }
                                    }
                                    td {
                                        ol {
                                            @for attempt in &delivery.log {
                                                li {
                                                    (format_time(attempt.attempted_at)) ": "
                                                    @if let Some(code) = attempt.status_code { "HTTP " (code) }
                                                    @if let Some(error) = &attempt.error { (error) }
                                                    " in " (attempt.latency_ms) " ms"
                                                    @if !attempt.response_excerpt.is_empty() {
                                                        pre.excerpt { (attempt.response_excerpt) }
                                                    }
                                                }
                                            }
                                        }
                                    }
                                    td {
                                        form method="post" action={ (base) "/deliveries/" (delivery.id) "/redeliver" } data-once {
                                            (csrf_field(ctx))
                                            button.small type="submit" { "Redeliver" }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        },
    )
}
