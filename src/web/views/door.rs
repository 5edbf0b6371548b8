//! The scanner page that door staff open from a staff link, and the door
//! links panel of the organizer's dashboard.

use maud::{Markup, html};
use time::OffsetDateTime;

use super::{FormError, PageContext, csrf_field, error_notice, invalid, layout};
use crate::{
    checkin::{
        Answer,
        links::{DoorLink, LinkState, OpenDoor},
    },
    domain::{CheckInResult, DoorSecret, EventId, ScanNonce, Zone},
    web::assets,
};

/// The scanner: the last answer (if any) large, then the form for the next
/// code with a fresh nonce. `typed` refills the field after a refusal.
pub fn scanner(
    ctx: &PageContext,
    door: &OpenDoor,
    answer: Option<&Answer>,
    typed: &str,
    error: Option<&FormError>,
) -> Markup {
    layout(
        ctx,
        &format!("Door: {}", door.door.as_str()),
        html! {
            section.door {
                h1 { "Door: " (door.door.as_str()) }
                p.meta { (door.event_title) " · " (door.venue) " · " (door.zone.format(door.starts_at)) }
                @if let Some(answer) = answer { (result(answer, &door.zone)) }
                form.card.door-scan #scan method="post" action="/door" data-once {
                    (csrf_field(ctx))
                    input type="hidden" name="nonce" value=(ScanNonce::generate().as_str());
                    (error_notice(error))
                    label for="code" { "Ticket code" }
                    input #code name="code" value=(typed) required maxlength="100" autofocus
                        autocomplete="off" autocapitalize="characters" spellcheck="false"
                        aria-invalid=[invalid(error, "code")];
                    button type="submit" { "Check in" }
                }
                div.camera #camera hidden {
                    button.secondary #camera-start type="button" { "Scan with the camera" }
                    video #camera-view playsinline muted hidden {}
                    p.hint #camera-status role="status" {}
                }
                p.hint { "Type the code printed under the QR code, or scan it where the camera is offered." }
            }
            script src=(assets::url("door.js")) defer {}
        },
    )
}

/// The big green or red answer.
fn result(answer: &Answer, zone: &Zone) -> Markup {
    let ok = answer.result.is_ok();
    html! {
        div.scan-result.(if ok { "ok" } else { "refused" }) #scan-result role="status"
            data-result=(answer.result.as_str()) {
            p.verdict { (if ok { "✓ Let in" } else { "✗ Do not let in" }) }
            p.reason { (answer.result.sentence()) " " code.reason-code { (answer.result.as_str()) } }
            @if let Some(ticket_type) = &answer.ticket_type {
                p.ticket-type-name { (ticket_type) }
            }
            @if answer.result == CheckInResult::AlreadyRedeemed {
                @if let (Some(at), Some(door)) = (answer.redeemed_at, &answer.door) {
                    p.when { "Checked in " (zone.format(at)) " at " (door) "." }
                }
            }
            p.code { "Code " code { (answer.code) } }
        }
    }
}

/// What the door link form holds (times as the form sends them).
#[derive(Debug, Clone, Default)]
pub struct LinkInput {
    pub door: String,
    pub valid_from: String,
    pub valid_until: String,
}

impl LinkInput {
    /// A blank form: valid from now until a day after the event starts,
    /// in the event's local time.
    pub fn defaults(now: OffsetDateTime, starts_at: OffsetDateTime, zone: &Zone) -> Self {
        Self {
            door: String::new(),
            valid_from: zone.input_value(now),
            valid_until: zone.input_value(starts_at.max(now) + time::Duration::days(1)),
        }
    }
}

/// The dashboard's door links: the form, a link just created (its secret
/// shown this once), and every link with its state.
pub struct DoorPanel<'a> {
    pub links: &'a [DoorLink],
    /// The event's: the form's times are local times in it.
    pub zone: &'a Zone,
    pub now: OffsetDateTime,
    pub input: LinkInput,
    pub created: Option<DoorSecret>,
    pub error: Option<FormError>,
}

pub fn panel(ctx: &PageContext, event_id: EventId, panel: &DoorPanel<'_>) -> Markup {
    let error = panel.error.as_ref();
    let input = &panel.input;
    html! {
        section aria-labelledby="door-heading" #door-links {
            h2 #door-heading { "At the door" }
            p.hint { "A staff link opens the ticket scanner for this event, without an organizer account, during its time window (local times in " (panel.zone.name()) "). Anyone holding it can check tickets in: share it with your door staff only." }
            @if let Some(secret) = &panel.created {
                @let path = format!("/door?s={}", secret.as_str());
                div.notice.success #new-door-link role="status" {
                    p { strong { "Staff link created." } " Copy it now: it is shown only this once." }
                    p { a href=(path) { code { (path) } } }
                }
            }
            form.card.door-link-form method="post" action={ "/organizer/events/" (event_id) "/door-links" } data-once {
                (csrf_field(ctx))
                (error_notice(error))
                label for="door" { "Door" }
                input #door name="door" required maxlength="60" value=(input.door) placeholder="North gate"
                    aria-invalid=[invalid(error, "door")];
                div.row {
                    div {
                        label for="valid_from" { "Valid from (local time)" }
                        input #valid_from type="datetime-local" name="valid_from" required value=(input.valid_from)
                            aria-invalid=[invalid(error, "valid_from")];
                    }
                    div {
                        label for="valid_until" { "Valid until (local time)" }
                        input #valid_until type="datetime-local" name="valid_until" required value=(input.valid_until)
                            aria-invalid=[invalid(error, "valid_until")];
                    }
                }
                button type="submit" { "Create staff link" }
            }
            @if panel.links.is_empty() {
                p.empty { "No staff links yet." }
            } @else {
                div.table-scroll {
                    table.events.door-links {
                        caption.visually-hidden { "Staff links" }
                        thead { tr { th scope="col" { "Door" } th scope="col" { "Valid" } th scope="col" { "State" } th scope="col" { "" } } }
                        tbody {
                            @for link in panel.links {
                                @let state = link.state(panel.now);
                                tr data-door-link=(link.id) {
                                    th scope="row" { (link.door) }
                                    td { (panel.zone.format(link.valid_from)) " – " (panel.zone.format(link.valid_until)) }
                                    td { span.badge.(if state == LinkState::Active { "confirmed" } else { "cancelled" }) { (state.as_str()) } }
                                    td {
                                        @if state != LinkState::Revoked {
                                            form.inline method="post" action={ "/organizer/events/" (event_id) "/door-links/" (link.id) "/revoke" } data-once {
                                                (csrf_field(ctx))
                                                button.secondary.small type="submit" { "Revoke" }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
