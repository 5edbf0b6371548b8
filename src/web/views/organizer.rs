use maud::{Markup, html};

use super::PageContext;
use super::{FormError, csrf_field, error_notice, invalid, layout, zone_names};
use crate::{
    db::events::EventDetail,
    domain::{
        DEFAULT_HOLD_MINUTES, DEFAULT_PAY_MINUTES, EventId, EventInput, MAX_HOLD_MINUTES,
        MAX_PAY_MINUTES, MIN_PAY_MINUTES, SaleState, TicketTypeInput,
    },
};

/// `unconfirmed`: the organizer's address, while it is not confirmed.
pub fn index(ctx: &PageContext, events: &[EventDetail], unconfirmed: Option<&str>) -> Markup {
    layout(
        ctx,
        "Your events",
        html! {
            div.heading-row {
                h1 { "Your events" }
                a.button href="/organizer/events/new" { "New event" }
            }
            @if let Some(email) = unconfirmed {
                (super::account::unconfirmed_notice(ctx, email))
            }
            @if events.is_empty() {
                p.empty { "No events yet." }
            } @else {
                table.events {
                    thead { tr { th { "Event" } th { "Starts" } th { "Status" } th { "Sold" } } }
                    tbody {
                        @for detail in events {
                            @let event = &detail.event;
                            tr {
                                td { a href={ "/organizer/events/" (event.id) } { (event.title) } }
                                td { (event.zone.format(event.starts_at)) }
                                td { span.badge { (event.status) } }
                                td { (detail.capacity() - detail.remaining()) " / " (detail.capacity()) }
                            }
                        }
                    }
                }
            }
        },
    )
}

/// The create/edit form. `event` is set when editing.
pub struct EventForm<'a> {
    pub event: Option<(EventId, SaleState)>,
    pub input: &'a EventInput,
    pub error: Option<FormError>,
    /// The waiting room's form, on the edit page.
    pub room: Option<RoomForm>,
}

/// The waiting room's settings as typed (strings, so that a refused form
/// comes back as it was).
#[derive(Debug, Clone, Default)]
pub struct RoomForm {
    pub enabled: bool,
    pub prequeue_minutes: String,
    pub admit_per_minute: String,
    pub max_active: String,
    pub pass_minutes: String,
    pub paused: bool,
    pub commitment: Option<String>,
    /// Live: waiting, admitted so far, passes neither spent nor expired.
    pub figures: Option<crate::waiting_room::RoomFigures>,
    pub error: Option<FormError>,
}

fn room_form(ctx: &PageContext, id: EventId, room: &RoomForm) -> Markup {
    let error = room.error.as_ref();
    html! {
        form.card.room-form #waiting-room method="post" action={ "/organizer/events/" (id) "/waiting-room" } data-once {
            h2 { "Waiting room" }
            p.hint { "Off by default. When on, buyers join a queue (from the pre-queue's opening), the pre-queue is shuffled at random at the sale's opening, and buyers are let in at the rate you set; each one admitted may buy once with their pass." }
            (csrf_field(ctx))
            (error_notice(error))
            label.choice {
                input type="checkbox" name="enabled" value="on" checked[room.enabled];
                " Waiting room on"
            }
            div.row {
                div {
                    label for="prequeue_minutes" { "Pre-queue opens (minutes before the sale)" }
                    input #prequeue_minutes type="number" name="prequeue_minutes" min="0" max="1440" required value=(room.prequeue_minutes) aria-invalid=[invalid(error, "prequeue_minutes")];
                }
                div {
                    label for="admit_per_minute" { "Buyers admitted per minute" }
                    input #admit_per_minute type="number" name="admit_per_minute" min="1" value=(room.admit_per_minute) aria-invalid=[invalid(error, "admit_per_minute")];
                }
                div {
                    label for="max_active" { "At most this many admitted buyers at once (optional)" }
                    input #max_active type="number" name="max_active" min="1" value=(room.max_active) aria-invalid=[invalid(error, "max_active")];
                }
                div {
                    label for="pass_minutes" { "A pass lasts (minutes)" }
                    input #pass_minutes type="number" name="pass_minutes" min="1" max="1440" required value=(room.pass_minutes) aria-invalid=[invalid(error, "pass_minutes")];
                }
            }
            label.choice {
                input type="checkbox" name="paused" value="on" checked[room.paused];
                " Admission paused"
            }
            @if let Some(f) = &room.figures {
                p.figures {
                    "In the queue: " strong { (f.waiting) }
                    " · admitted in the last minute: " strong { (f.admitted_last_minute) }
                    " · admitted so far: " strong { (f.admitted) }
                    " · live passes: " strong { (f.active_passes) }
                    " · " a href={ "/organizer/events/" (id) "#waiting-room" } { "live figures on the dashboard" }
                }
            }
            @if let Some(commitment) = &room.commitment {
                p.hint { "Shuffle commitment (SHA-256 of the seed): " code { (commitment) } }
            }
            button type="submit" { "Save waiting room" }
        }
    }
}

/// Blank ticket-type rows offered for new ticket types.
const BLANK_ROWS: usize = 2;

pub fn form(ctx: &PageContext, form: &EventForm<'_>) -> Markup {
    let error = form.error.as_ref();
    let input = form.input;
    let (title, action) = match form.event {
        Some((id, _)) => (
            "Edit event".to_owned(),
            format!("/organizer/events/{id}/edit"),
        ),
        None => ("New event".to_owned(), "/organizer/events".to_owned()),
    };
    let mut rows: Vec<TicketTypeInput> = input.ticket_types.clone();
    let blanks = if rows.is_empty() {
        BLANK_ROWS + 1
    } else {
        BLANK_ROWS
    };
    rows.extend(std::iter::repeat_with(TicketTypeInput::default).take(blanks));
    let body = html! {
        h1 { (title) }
        @if let Some((id, state)) = form.event { (status_bar(ctx, id, state, EventPage::Edit)) }
        form.card.event-form method="post" action=(action) data-once {
            (csrf_field(ctx))
            (error_notice(error))
            label for="title" { "Title" }
            input #title name="title" required maxlength="200" value=(input.title) aria-invalid=[invalid(error, "title")];
            label for="venue" { "Venue" }
            input #venue name="venue" required maxlength="200" value=(input.venue) aria-invalid=[invalid(error, "venue")];
            label for="description" { "Description" }
            textarea #description name="description" rows="4" maxlength="10000" aria-invalid=[invalid(error, "description")] { (input.description) }
            label for="time_zone" { "Time zone of the event (its pages and mails show times in it)" }
            input #time_zone name="time_zone" required list="time-zones" autocomplete="off" maxlength="64"
                placeholder="Europe/Berlin" value=(input.time_zone) aria-invalid=[invalid(error, "time_zone")];
            datalist #time-zones { @for name in zone_names() { option value=(name) {} } }
            p.hint { "The times below are local times in this zone. A time the clocks skip or repeat (the night they change) is refused: choose one outside that hour." }
            div.row {
                div {
                    label for="starts_at" { "Event starts (local time)" }
                    input #starts_at type="datetime-local" name="starts_at" required value=(input.starts_at) aria-invalid=[invalid(error, "starts_at")];
                }
                div {
                    label for="sale_opens_at" { "Sale opens (local time)" }
                    input #sale_opens_at type="datetime-local" name="sale_opens_at" required value=(input.sale_opens_at) aria-invalid=[invalid(error, "sale_opens_at")];
                }
                div {
                    label for="sale_closes_at" { "Sale closes (local time, optional)" }
                    input #sale_closes_at type="datetime-local" name="sale_closes_at" value=(input.sale_closes_at) aria-invalid=[invalid(error, "sale_closes_at")];
                }
            }
            label for="max_per_buyer" { "Tickets per buyer for the whole event, across ticket types (optional)" }
            input #max_per_buyer type="number" name="max_per_buyer" min="1" inputmode="numeric" value=(input.max_per_buyer) aria-invalid=[invalid(error, "max_per_buyer")];
            label for="hold_minutes" {
                "Hold each order until its buyer confirms from their mailbox, for this many minutes "
                "(blank: orders are confirmed at once; " (DEFAULT_HOLD_MINUTES) " is usual)"
            }
            input #hold_minutes type="number" name="hold_minutes" min="1" max=(MAX_HOLD_MINUTES) inputmode="numeric"
                placeholder=(DEFAULT_HOLD_MINUTES) value=(input.hold_minutes) aria-invalid=[invalid(error, "hold_minutes")];
            p.hint { "Held tickets leave the stock at once; unconfirmed ones go back on sale when their time runs out." }
            label for="pay_minutes" {
                "Minutes a buyer has to pay for tickets with a price (blank: " (DEFAULT_PAY_MINUTES) ")"
            }
            input #pay_minutes type="number" name="pay_minutes" min=(MIN_PAY_MINUTES) max=(MAX_PAY_MINUTES) inputmode="numeric"
                placeholder=(DEFAULT_PAY_MINUTES) value=(input.pay_minutes) aria-invalid=[invalid(error, "pay_minutes")];
            label for="payment" { "Who takes the money for tickets with a price" }
            select #payment name="payment" aria-invalid=[invalid(error, "payment")] {
                option value="stripe" selected[input.payment != "offline"] { "Buyers pay by card, through Stripe, before their tickets are confirmed" }
                option value="offline" selected[input.payment == "offline"] { "I collect it myself (at the door, by invoice); orders are confirmed at once" }
            }
            @if form.event.is_none() {
                label.choice {
                    input type="checkbox" name="status" value="published" checked[input.status == "published"];
                    " Publish now (otherwise it stays a draft)"
                }
            }
            h2 { "Ticket types" }
            p.hint { "Leave a row empty to skip it. Limits default to 10 per order, and per buyer to the per-order limit." }
            @for (i, row) in rows.iter().enumerate() { (ticket_type_row(i, row, error)) }
            button type="submit" { @if form.event.is_some() { "Save changes" } @else { "Create event" } }
        }
        @if let (Some((id, _)), Some(room)) = (form.event, &form.room) { (room_form(ctx, id, room)) }
    };
    layout(ctx, &title, body)
}

fn ticket_type_row(i: usize, row: &TicketTypeInput, error: Option<&FormError>) -> Markup {
    let field = |name: &str| format!("ticket_types[{i}].{name}");
    let input_name = |name: &str| format!("tt_{name}_{i}");
    let id = |name: &str| format!("tt-{name}-{i}");
    html! {
        fieldset.ticket-row {
            legend { "Ticket type " (i + 1) }
            @if let Some(existing) = row.id { input type="hidden" name=(input_name("id")) value=(existing); }
            div.row {
                div {
                    label for=(id("name")) { "Name" }
                    input id=(id("name")) name=(input_name("name")) maxlength="100" value=(row.name)
                        placeholder="Standing" aria-invalid=[invalid(error, &field("name"))];
                }
                div {
                    label for=(id("price")) { "Price" }
                    input id=(id("price")) name=(input_name("price")) inputmode="decimal" value=(row.price)
                        placeholder="25.00" aria-invalid=[invalid(error, &field("price"))];
                }
                div.narrow {
                    label for=(id("currency")) { "Currency" }
                    input id=(id("currency")) name=(input_name("currency")) maxlength="3"
                        value=(if row.currency.is_empty() { "EUR" } else { &row.currency })
                        aria-invalid=[invalid(error, &field("currency"))];
                }
                div {
                    label for=(id("capacity")) { "Capacity" }
                    input id=(id("capacity")) name=(input_name("capacity")) type="number" min="0" value=(row.capacity)
                        aria-invalid=[invalid(error, &field("capacity"))];
                }
                div {
                    label for=(id("max_per_order")) { "Max per order" }
                    input id=(id("max_per_order")) name=(input_name("max_per_order")) type="number" min="1" value=(row.max_per_order)
                        aria-invalid=[invalid(error, &field("max_per_order"))];
                }
                div {
                    label for=(id("max_per_buyer")) { "Max per buyer" }
                    input id=(id("max_per_buyer")) name=(input_name("max_per_buyer")) type="number" min="1" value=(row.max_per_buyer)
                        aria-invalid=[invalid(error, &field("max_per_buyer"))];
                }
            }
            label.choice {
                input type="checkbox" name=(input_name("hidden")) checked[row.hidden];
                " Hidden: shown and sold only with a presale code that unlocks it"
            }
        }
    }
}

/// The organizer page an event's status bar sits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventPage {
    Dashboard,
    Edit,
}

/// The event's status and what can be done with it: publish or unpublish,
/// edit (or back to the dashboard), cancel. A cancelled event is final.
pub fn status_bar(ctx: &PageContext, id: EventId, state: SaleState, page: EventPage) -> Markup {
    let cancelled = state == SaleState::Cancelled;
    html! {
        div.status-bar.card {
            p {
                "Status: "
                @match state {
                    SaleState::Draft => { strong { "draft" } " — buyers cannot see it." },
                    SaleState::Cancelled => { strong { "cancelled" } " — sales stopped and every order was cancelled." },
                    SaleState::NotOpenYet => { strong { "published" } " — the sale has not opened yet." },
                    SaleState::Open => { strong { "published" } " — on sale now." },
                    SaleState::Closed => { strong { "published" } " — the sale has closed." },
                }
                @if state != SaleState::Draft {
                    " " a href={ "/events/" (id) } { "View public page" }
                }
            }
            div.actions {
                @match page {
                    EventPage::Dashboard if !cancelled => a.button.secondary href={ "/organizer/events/" (id) "/edit" } { "Edit event" },
                    EventPage::Edit => a.button.secondary href={ "/organizer/events/" (id) } { "Dashboard" },
                    EventPage::Dashboard => {},
                }
                @if !cancelled {
                    a.button.secondary href={ "/organizer/events/" (id) "/codes" } { "Presale codes" }
                }
                a.button.secondary href={ "/organizer/events/" (id) "/waiting-list" } { "Waiting lists" }
                @match state {
                    SaleState::Draft => form method="post" action={ "/organizer/events/" (id) "/publish" } data-once {
                        (csrf_field(ctx))
                        button type="submit" { "Publish" }
                    },
                    SaleState::Cancelled => {},
                    _ => form method="post" action={ "/organizer/events/" (id) "/unpublish" } data-once {
                        (csrf_field(ctx))
                        button.secondary type="submit" { "Unpublish" }
                    },
                }
                @if !cancelled {
                    form method="post" action={ "/organizer/events/" (id) "/cancel" } data-once
                        data-confirm="Cancel this event? Sales stop, every order is cancelled and its tickets are released. This cannot be undone." {
                        (csrf_field(ctx))
                        button.danger type="submit" { "Cancel event" }
                    }
                }
            }
        }
    }
}
