use maud::{Markup, html};

use super::PageContext;
use super::{FormError, csrf_field, error_notice, format_time, invalid, layout};
use crate::auth::ApiToken;

/// What the sign-up and log-in forms keep when they come back.
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    pub email: String,
    pub next: String,
    pub error: Option<FormError>,
}

pub fn sign_up(ctx: &PageContext, form: &Credentials) -> Markup {
    let error = form.error.as_ref();
    layout(
        ctx,
        "Create an organizer account",
        html! {
            section.card.narrow-page {
                h1 { "Create an organizer account" }
                p { "Buyers need no account. This is for people who sell tickets." }
                form method="post" action="/signup" data-once {
                    (csrf_field(ctx))
                    (error_notice(error))
                    label for="email" { "Email" }
                    input #email type="email" name="email" autocomplete="email" required value=(form.email)
                        aria-invalid=[invalid(error, "email")];
                    label for="password" { "Password (at least 10 characters)" }
                    input #password type="password" name="password" autocomplete="new-password" required minlength="10"
                        aria-invalid=[invalid(error, "password")];
                    button type="submit" { "Create account" }
                }
                p { "Already have an account? " a href="/login" { "Log in" } }
            }
        },
    )
}

pub fn log_in(ctx: &PageContext, form: &Credentials) -> Markup {
    let error = form.error.as_ref();
    layout(
        ctx,
        "Log in",
        html! {
            section.card.narrow-page {
                h1 { "Organizer log-in" }
                form method="post" action="/login" data-once {
                    (csrf_field(ctx))
                    (error_notice(error))
                    input type="hidden" name="next" value=(form.next);
                    label for="email" { "Email" }
                    input #email type="email" name="email" autocomplete="email" required value=(form.email);
                    label for="password" { "Password" }
                    input #password type="password" name="password" autocomplete="current-password" required
                        aria-invalid=[invalid(error, "password")];
                    button type="submit" { "Log in" }
                }
                p { "New here? " a href="/signup" { "Create an organizer account" } }
            }
        },
    )
}

pub fn settings(
    ctx: &PageContext,
    tokens: &[ApiToken],
    new_token: Option<&str>,
    error: Option<&FormError>,
    webhooks: Markup,
) -> Markup {
    layout(
        ctx,
        "Settings",
        html! {
            h1 { "Settings" }
            section.card {
                h2 { "API tokens" }
                p { "Scripts call " code { "/api/v1/organizer/…" } " with " code { "Authorization: Bearer <token>" } "." }
                p {
                    "Every operation is in the "
                    a href="/api/v1/docs" { "API reference" }
                    " and in the OpenAPI document, "
                    a href="/api/v1/openapi.json" { code { "/api/v1/openapi.json" } }
                    "."
                }
                @if let Some(token) = new_token {
                    div.notice.success role="status" {
                        p { strong { "Your new token — copy it now, it will not be shown again:" } }
                        p { code.token { (token) } }
                    }
                }
                form method="post" action="/organizer/settings/tokens" data-once {
                    (csrf_field(ctx))
                    (error_notice(error))
                    label for="token-name" { "Token name" }
                    input #token-name name="name" required maxlength="100" placeholder="Box office script"
                        aria-invalid=[invalid(error, "name")];
                    button type="submit" { "Create token" }
                }
                @if !tokens.is_empty() {
                    table.events {
                        thead { tr { th { "Name" } th { "Token" } th { "Created" } th { "Last used" } th { span.visually-hidden { "Actions" } } } }
                        tbody {
                            @for token in tokens {
                                tr {
                                    td { (token.name) }
                                    td { code { (token.prefix) "…" } }
                                    td { (format_time(token.created_at)) }
                                    td { @if let Some(at) = token.last_used_at { (format_time(at)) } @else { "never" } }
                                    td {
                                        @if token.revoked_at.is_some() {
                                            span.badge.sold-out { "revoked" }
                                        } @else {
                                            form method="post" action={ "/organizer/settings/tokens/" (token.id) "/revoke" } data-once
                                                data-confirm="Revoke this token? Scripts using it stop working." {
                                                (csrf_field(ctx))
                                                button.danger.small type="submit" { "Revoke" }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            (webhooks)
        },
    )
}

/// Shown to an organizer whose address is not confirmed: they may prepare
/// events, not publish them.
pub fn unconfirmed_notice(ctx: &PageContext, email: &str) -> Markup {
    html! {
        div.notice role="status" {
            p {
                strong { "Confirm your address to publish events." }
                " We mailed a link to " (email) " when you signed up; "
                "until you follow it your events stay drafts."
            }
            form method="post" action="/organizer/settings/confirmation-mail" data-once {
                (csrf_field(ctx))
                button.small type="submit" { "Mail the link again" }
            }
        }
    }
}

/// After "Mail the link again": sent, or sent a short while ago already.
pub fn confirmation_mailed(ctx: &PageContext, email: &str, sent_now: bool) -> Markup {
    layout(
        ctx,
        "Confirmation mail",
        html! {
            section.card.narrow-page {
                h1 { "Check your inbox" }
                @if sent_now {
                    p { "A new link is on its way to " (email) "." }
                } @else {
                    p {
                        "A link went to " (email) " a few minutes ago (or your address is confirmed "
                        "already). Look in the spam folder too; you can ask again in a few minutes."
                    }
                }
                p { a href="/organizer" { "Back to your events" } }
            }
        },
    )
}

/// After the mailed link's button.
pub fn email_confirmed(ctx: &PageContext) -> Markup {
    layout(
        ctx,
        "Address confirmed",
        html! {
            section.card.narrow-page {
                h1 { "Address confirmed" }
                p { "Thank you. You can publish events now." }
                p { a.button href="/organizer" { "Go to your events" } }
            }
        },
    )
}
