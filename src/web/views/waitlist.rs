//! Waiting lists: the join form under a sold-out ticket type, the pages a
//! buyer reaches from their mail, and the organizer's list with its switch.

use maud::{Markup, html};
use time::OffsetDateTime;

use super::{FormError, PageContext, csrf_field, error_notice, invalid, layout};
use crate::{
    db::{
        events::EventDetail,
        waitlist::{Entry, EventLists},
    },
    domain::{ConfirmToken, OrderStatus, WaitlistStatus},
};

/// What the buyer typed, kept when the form comes back with an error.
#[derive(Debug, Clone, Default)]
pub struct JoinForm {
    pub ticket_type_id: String,
    pub quantity: String,
    pub email: String,
    pub error: Option<FormError>,
}

/// The form, for the event's sold-out ticket types; nothing if none is.
pub fn join_form(ctx: &PageContext, detail: &EventDetail, form: &JoinForm) -> Markup {
    let sold_out: Vec<_> = detail
        .ticket_types
        .iter()
        .filter(|t| t.remaining == 0 && !t.hidden)
        .collect();
    let error = form.error.as_ref();
    let selected = sold_out
        .iter()
        .find(|t| t.id.to_string() == form.ticket_type_id)
        .or(sold_out.first())
        .map(|t| t.id);
    html! {
        @if !sold_out.is_empty() {
            form.waitlist.card method="post" action={ "/events/" (detail.event.id) "/waiting-list" } data-once {
                h2 { "Waiting list" }
                p {
                    "When tickets come back (a buyer cancels, or does not confirm in time), the first person "
                    "in line gets them, held for a few minutes, and a mail with the link to confirm."
                }
                (csrf_field(ctx))
                (error_notice(error))
                fieldset aria-invalid=[invalid(error, "ticket_type_id")] {
                    legend { "Ticket type" }
                    @for tt in &sold_out {
                        label.choice {
                            input type="radio" name="ticket_type_id" value=(tt.id) required
                                checked[Some(tt.id) == selected];
                            " " (tt.name)
                            small { " (up to " (tt.max_per_order.min(tt.max_per_buyer)) ")" }
                        }
                    }
                }
                label for="waitlist-quantity" { "How many" }
                input #waitlist-quantity type="number" name="quantity" min="1" required
                    value=(if form.quantity.is_empty() { "1" } else { &form.quantity })
                    aria-invalid=[invalid(error, "quantity")];
                label for="waitlist-email" { "Email" }
                input #waitlist-email type="email" name="email" autocomplete="email" required
                    value=(form.email) aria-invalid=[invalid(error, "email")];
                button type="submit" { "Join the waiting list" }
            }
        }
    }
}

/// The join form again, with why it was refused.
pub fn join_page(ctx: &PageContext, detail: &EventDetail, form: &JoinForm) -> Markup {
    let event = &detail.event;
    layout(
        ctx,
        &event.title,
        html! {
            p { a href={ "/events/" (event.id) } { "← " (event.title) } }
            @if detail.ticket_types.iter().any(|t| t.remaining == 0 && !t.hidden) {
                (join_form(ctx, detail, form))
            } @else {
                (error_notice(form.error.as_ref()))
            }
        },
    )
}

/// After joining. The same words whether this address joined now or had
/// a place already: the page does not tell anyone who is on a list.
pub fn mailed_page(ctx: &PageContext, detail: &EventDetail, email: &str) -> Markup {
    let event = &detail.event;
    layout(
        ctx,
        "Check your mailbox",
        html! {
            p { a href={ "/events/" (event.id) } { "← " (event.title) } }
            h1 { "Check your mailbox" }
            p.notice.success role="status" {
                "A link to take your place in line is on its way to " strong { (email) } ". "
                "The line is in the order places are confirmed. An address has one place per list: "
                "if it joined before, the link is in the mail sent then."
            }
        },
    )
}

/// The place, as its holder sees it from the link in their mail.
pub fn entry_page(
    ctx: &PageContext,
    entry: &Entry,
    token: &ConfirmToken,
    now: OffsetDateTime,
) -> Markup {
    let leave_action = format!("/waiting-list/{}/leave", entry.id);
    layout(
        ctx,
        "Your place on the waiting list",
        html! {
            p { a href={ "/events/" (entry.event_id) } { "← " (entry.event_title) } }
            h1 { "Waiting list: " (entry.ticket_type_name) }
            p.meta { (entry.quantity) " " (if entry.quantity == 1 { "ticket" } else { "tickets" }) " for " (entry.email) }
            @match entry.status {
                WaitlistStatus::Unconfirmed => p.notice role="status" {
                    "This place is not confirmed yet: follow the link in the mail we sent."
                },
                WaitlistStatus::Waiting => {
                    p.notice.success role="status" {
                        "You are in line. "
                        @match entry.ahead {
                            Some(0) => "You are next.",
                            Some(1) => "One person is before you.",
                            Some(n) => { (n) " people are before you." },
                            None => "",
                        }
                        " When tickets come back, we hold them for you and mail you."
                    }
                    @if entry.remaining > 0 {
                        p { "Tickets of this type are on sale right now: "
                            a href={ "/events/" (entry.event_id) } { "buy them on the event page" } "." }
                    }
                },
                WaitlistStatus::Offered => {
                    @if let Some(order_id) = entry.order_id {
                        @match entry.order_status {
                            Some(OrderStatus::Held) => p.notice.success role="status" {
                                "Tickets came back for you and are held"
                                @if let Some(until) = entry.hold_expires_at.filter(|at| *at > now) {
                                    " until " (entry.zone.format(until))
                                }
                                ". "
                                a href={ "/orders/" (order_id) "/confirm?t=" (token.as_str()) } { "Confirm your order" }
                                " to get them. Not coming? "
                                a href={ "/orders/" (order_id) "?s=" (token.as_str()) } { "Release them" }
                                " to the next person in line."
                            },
                            Some(OrderStatus::Confirmed) => p.notice.success role="status" {
                                "Your order from the waiting list is confirmed: "
                                a href={ "/orders/" (order_id) "?t=" (token.as_str()) } { "see your tickets" } "."
                            },
                            Some(OrderStatus::Expired) => p.notice role="status" {
                                "Tickets were offered to you, and the offer ended unconfirmed; they went to the next person in line."
                            },
                            _ => p.notice role="status" {
                                "The order from this offer was cancelled: "
                                a href={ "/orders/" (order_id) } { "see the order" } "."
                            },
                        }
                    }
                },
                WaitlistStatus::Passed => p.notice role="status" {
                    "Tickets came back while you already held as many as one buyer may, so they went to the next person in line."
                },
                WaitlistStatus::Left => p.notice role="status" { "You left this waiting list." },
                WaitlistStatus::Closed => p.notice role="status" { "The event was cancelled, and its waiting lists with it." },
            }
            @if matches!(entry.status, WaitlistStatus::Unconfirmed | WaitlistStatus::Waiting) {
                form method="post" action=(leave_action) {
                    (csrf_field(ctx))
                    input type="hidden" name="t" value=(token.as_str());
                    button.secondary type="submit" { "Leave the waiting list" }
                }
            }
        },
    )
}

/// The organizer's view of the event's lists, with a page of places
/// (`first`: the first page).
pub fn organizer_page(
    ctx: &PageContext,
    detail: &EventDetail,
    lists: &EventLists,
    first: bool,
) -> Markup {
    let event = &detail.event;
    let base = format!("/organizer/events/{}/waiting-list", event.id);
    let type_name = |id| {
        detail
            .ticket_types
            .iter()
            .find(|t| t.id == id)
            .map(|t| t.name.as_str())
            .unwrap_or("?")
    };
    layout(
        ctx,
        "Waiting lists",
        html! {
            p { a href={ "/organizer/events/" (event.id) } { "← " (event.title) } }
            h1 { "Waiting lists" }
            p {
                "Buyers join a sold-out ticket type's list from the event page and confirm their address by mail. "
                "While offers are on, tickets that come back (a cancel, an unconfirmed hold, a capacity you raise) "
                "go to the first person in line as a held order, in the same step that frees them."
            }
            form.card method="post" action={ "/organizer/events/" (event.id) "/waiting-list/offers" } {
                (csrf_field(ctx))
                @if lists.offers_on {
                    p { strong { "Automatic offers are on." } " Returned tickets go to the waiting list before anyone else." }
                    input type="hidden" name="offers" value="off";
                    button.secondary type="submit" { "Turn offers off" }
                } @else {
                    p { strong { "Automatic offers are off." } " Returned tickets go back on sale; the lists are kept." }
                    input type="hidden" name="offers" value="on";
                    button type="submit" { "Turn offers on (tickets on sale now go to those in line)" }
                }
            }
            table.events {
                thead { tr { th { "Ticket type" } th { "In line" } } }
                tbody {
                    @for tt in &detail.ticket_types {
                        tr { td { (tt.name) } td { (lists.waiting(tt.id)) } }
                    }
                }
            }
            @if lists.entries.is_empty() {
                p.empty { "Nobody has joined a waiting list yet." }
            } @else {
                table.events {
                    thead { tr { th { "Ticket type" } th { "Email" } th { "Tickets" } th { "Status" } th { "Joined" } th { "Offered" } } }
                    tbody {
                        @for entry in &lists.entries {
                            tr {
                                td { (type_name(entry.ticket_type_id)) }
                                td { (entry.email) }
                                td { (entry.quantity) }
                                td { (entry.status.as_str()) }
                                td { (event.zone.format(entry.joined_at)) }
                                td {
                                    @if let (Some(at), Some(order_id)) = (entry.offered_at, entry.order_id) {
                                        (event.zone.format(at)) " · order " code { (order_id.to_string().get(..8).unwrap_or_default()) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @if !first || lists.next.is_some() {
                nav.pages aria-label="More places" {
                    @if !first {
                        a href=(base) { "← First places" } " "
                    }
                    @if let Some(next) = &lists.next {
                        a rel="next" href={ (base) "?after=" (next.encode()) } { "Later places →" }
                    }
                }
            }
        },
    )
}
