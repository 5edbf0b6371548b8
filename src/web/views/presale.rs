//! The organizer's presale codes page: the event's codes with their uses,
//! a form that creates one code or a batch, and the CSV export.

use maud::{Markup, html};

use super::{FormError, PageContext, csrf_field, error_notice, invalid, layout};
use crate::{
    db::{events::EventDetail, presale::CodeSummary},
    domain::{CodeCursor, MAX_CODE_USES, MAX_CODES_PER_BATCH, is_guessable},
};

/// What the organizer typed, kept when the form comes back with an error.
#[derive(Debug, Clone, Default)]
pub struct CodeForm {
    pub code: String,
    pub count: String,
    pub max_uses: String,
    pub valid_from: String,
    pub valid_until: String,
    pub ticket_type_ids: Vec<String>,
    pub error: Option<FormError>,
}

/// Where the shown page of codes is in the list.
#[derive(Debug, Clone, Default)]
pub struct Pages {
    /// The first page (no `after`).
    pub first: bool,
    pub next: Option<CodeCursor>,
}

pub fn page(
    ctx: &PageContext,
    detail: &EventDetail,
    codes: &[CodeSummary],
    pages: &Pages,
    form: &CodeForm,
    created: usize,
) -> Markup {
    let event = &detail.event;
    let base = format!("/organizer/events/{}/codes", event.id);
    let type_name = |id: &uuid::Uuid| {
        detail
            .ticket_types
            .iter()
            .find(|t| t.id.get() == *id)
            .map(|t| t.name.as_str())
            .unwrap_or("?")
    };
    let error = form.error.as_ref();
    layout(
        ctx,
        "Presale codes",
        html! {
            p { a href={ "/organizer/events/" (event.id) } { "← " (event.title) } }
            h1 { "Presale codes" }
            p {
                "A code unlocks the ticket types you choose, during its window, for a number of tickets in all. "
                "Hidden ticket types (set on the edit page) are shown and sold only with a code. "
                "Buyers type the code on the event page, or open a link that carries it: "
                code { "/events/" (event.id) "?code=CODE" } "."
            }
            @if created > 0 {
                p.notice.success role="status" { (created) " " (if created == 1 { "code" } else { "codes" }) " created." }
            }
            @if codes.is_empty() {
                p.empty { "No codes yet." }
            } @else {
                p { a href={ (base) ".csv" } download { "Download all codes (CSV)" } }
                table.events {
                    thead { tr { th { "Code" } th { "Used" } th { "Valid" } th { "Unlocks" } } }
                    tbody {
                        @for code in codes {
                            tr {
                                td {
                                    code { (code.code) }
                                    @if is_guessable(&code.code) {
                                        " " span.badge title="Built of words, dates or patterns that a guesser tries first. Wrong guesses are slowed per address, but a code that must stay secret should be generated." { "guessable" }
                                    }
                                }
                                td { (code.used) " of " (code.max_uses) }
                                td {
                                    @match (code.valid_from, code.valid_until) {
                                        (None, None) => "always",
                                        (Some(from), None) => { "from " (event.zone.format(from)) },
                                        (None, Some(until)) => { "until " (event.zone.format(until)) },
                                        (Some(from), Some(until)) => { (event.zone.format(from)) " – " (event.zone.format(until)) },
                                    }
                                }
                                td { @for (i, id) in code.ticket_type_ids.iter().enumerate() {
                                    @if i > 0 { ", " } (type_name(id))
                                } }
                            }
                        }
                    }
                }
            }
            @if !pages.first || pages.next.is_some() {
                nav.pages aria-label="More codes" {
                    @if !pages.first {
                        a href=(base) { "← First codes" } " "
                    }
                    @if let Some(next) = &pages.next {
                        a rel="next" href={ (base) "?after=" (next.encode()) } { "Later codes →" }
                    }
                }
            }
            h2 { "Create codes" }
            form.card method="post" action=(base) data-once {
                (csrf_field(ctx))
                (error_notice(error))
                label for="code" { "One code of your own (letters, digits, dashes), or leave blank to generate codes" }
                input #code name="code" maxlength="40" value=(form.code) aria-invalid=[invalid(error, "code")];
                label for="count" { "How many codes to generate (1–" (MAX_CODES_PER_BATCH) ")" }
                input #count name="count" type="number" min="1" max=(MAX_CODES_PER_BATCH) inputmode="numeric"
                    placeholder="1" value=(form.count) aria-invalid=[invalid(error, "count")];
                label for="max_uses" { "Tickets each code may buy in all (1–" (MAX_CODE_USES) ")" }
                input #max_uses name="max_uses" type="number" min="1" max=(MAX_CODE_USES) required inputmode="numeric"
                    value=(form.max_uses) aria-invalid=[invalid(error, "max_uses")];
                div.row {
                    div {
                        label for="valid_from" { "Valid from (local time in " (event.zone.name()) ", optional)" }
                        input #valid_from name="valid_from" type="datetime-local" value=(form.valid_from)
                            aria-invalid=[invalid(error, "valid_from")];
                    }
                    div {
                        label for="valid_until" { "Valid until (local time in " (event.zone.name()) ", optional)" }
                        input #valid_until name="valid_until" type="datetime-local" value=(form.valid_until)
                            aria-invalid=[invalid(error, "valid_until")];
                    }
                }
                fieldset aria-invalid=[invalid(error, "ticket_type_ids")] {
                    legend { "Unlocks" }
                    @for tt in &detail.ticket_types {
                        label.choice {
                            input type="checkbox" name="ticket_type_ids" value=(tt.id)
                                checked[form.ticket_type_ids.iter().any(|id| *id == tt.id.to_string())];
                            " " (tt.name)
                            @if tt.hidden { small { " (hidden)" } }
                        }
                    }
                }
                button type="submit" { "Create" }
            }
        },
    )
}
