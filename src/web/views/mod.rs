//! maud templates. User text is always interpolated (escaped), never
//! `PreEscaped`.

pub mod account;
pub mod api_docs;
mod chart;
pub mod dashboard;
pub mod door;
pub mod events;
pub mod mailed_link;
pub mod orders;
pub mod organizer;
pub mod pay;
pub mod presale;
pub mod queue;
pub mod tickets;
pub mod waitlist;
pub mod webhooks;

use axum::http::StatusCode;
use maud::{DOCTYPE, Markup, html};
use time::OffsetDateTime;

use super::{assets, csrf};
pub use crate::domain::format_time;

/// What every page needs besides its own data: the CSRF token for its forms
/// and, on organizer pages, who is logged in.
#[derive(Debug, Clone, Default)]
pub struct PageContext {
    pub csrf: String,
    pub organizer: Option<crate::auth::CurrentOrganizer>,
}

/// The page frame shared by every page.
pub fn layout(ctx: &PageContext, title: &str, body: Markup) -> Markup {
    layout_refreshing(ctx, title, None, body)
}

/// The page frame, reloading itself every `refresh_secs` (no script needed).
pub fn layout_refreshing(
    ctx: &PageContext,
    title: &str,
    refresh_secs: Option<u32>,
    body: Markup,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if let Some(secs) = refresh_secs {
                    meta http-equiv="refresh" content=(secs);
                }
                title { (title) " · Stampede" }
                link rel="stylesheet" href=(assets::url("style.css"));
                script src=(assets::url("app.js")) defer {}
            }
            body {
                a.skip href="#main" { "Skip to content" }
                header.site {
                    nav aria-label="Main" {
                        a.brand href="/" { "Stampede" }
                        a href="/" { "Events" }
                        a href="/tickets" { "My tickets" }
                        a href="/organizer" { "Organizer" }
                        @if let Some(organizer) = &ctx.organizer {
                            a href="/organizer/settings" title="Settings and API tokens" { (organizer.email) }
                            form.inline method="post" action="/logout" {
                                (csrf_field(ctx))
                                button.link type="submit" { "Log out" }
                            }
                        }
                    }
                }
                main #main { (body) }
                footer.site { p { "Stampede — every ticket sold exactly once." } }
            }
        }
    }
}

pub fn error_page(status: StatusCode, message: &str) -> Markup {
    let heading = match status {
        StatusCode::NOT_FOUND => "Not found",
        StatusCode::SERVICE_UNAVAILABLE => "Busy",
        s if s.is_server_error() => "Something went wrong",
        _ => "That did not work",
    };
    layout(
        &PageContext::default(),
        heading,
        html! {
            section.card {
                h1 { (heading) }
                p.notice.error role="alert" { (message) }
                p { a href="/" { "Back to the events" } }
            }
        },
    )
}

/// An instant as the event's local time, with the zone's abbreviation; the
/// page's script adds the reader's own local time when their zone is
/// another (static/app.js).
pub fn event_time(zone: &crate::domain::Zone, at: OffsetDateTime) -> Markup {
    html! { time datetime=(rfc3339(at)) data-zone=(zone.name()) { (zone.format(at)) } }
}

/// A `<time datetime>` value: RFC 3339 in UTC.
fn rfc3339(t: OffsetDateTime) -> String {
    t.to_offset(time::UtcOffset::UTC)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Every zone of the compiled-in database, for the time-zone field's
/// suggestions (sorted once).
pub fn zone_names() -> &'static [String] {
    static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        let mut names: Vec<String> = jiff::tz::db()
            .available()
            .map(|name| name.as_str().to_owned())
            .filter(|name| name.contains('/') || name == "UTC")
            .collect();
        names.sort();
        names
    })
}

/// An error shown beside a form, with the field it concerns.
#[derive(Debug, Clone, Default)]
pub struct FormError {
    pub field: Option<String>,
    pub message: String,
}

impl FormError {
    pub fn from_app(err: &crate::error::AppError) -> Self {
        Self {
            field: err.field().map(str::to_owned),
            message: err.to_string(),
        }
    }

    pub fn is_about(&self, field: &str) -> bool {
        self.field.as_deref() == Some(field)
    }
}

/// `aria-invalid` for an input whose field the error names.
pub fn invalid(error: Option<&FormError>, field: &str) -> Option<&'static str> {
    error.filter(|e| e.is_about(field)).map(|_| "true")
}

pub fn error_notice(error: Option<&FormError>) -> Markup {
    html! {
        @if let Some(error) = error {
            p.notice.error role="alert" #form-error { (error.message) }
        }
    }
}

/// The hidden field every state-changing form carries (see `web::csrf`).
pub fn csrf_field(ctx: &PageContext) -> Markup {
    html! { input type="hidden" name=(csrf::FIELD) value=(ctx.csrf); }
}
