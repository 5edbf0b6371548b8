use maud::{Markup, html};
use time::OffsetDateTime;

use super::PageContext;
use super::{FormError, csrf_field, error_notice, event_time, invalid, layout};
use crate::{
    db::events::{EventDetail, TicketType},
    domain::{EventCursor, SaleState, format_price},
};

pub fn index(ctx: &PageContext, events: &[EventDetail], next: Option<EventCursor>) -> Markup {
    layout(
        ctx,
        "Events",
        html! {
            h1 { "Upcoming events" }
            @if events.is_empty() {
                p.empty { "No events on sale yet. Organizers can create one under " a href="/organizer" { "Organizer" } "." }
            } @else {
                ul.event-list {
                    @for detail in events {
                        @let event = &detail.event;
                        li.card {
                            h2 { a href={ "/events/" (event.id) } { (event.title) } }
                            p.meta { (event_time(&event.zone, event.starts_at)) " · " (event.venue) }
                            p {
                                @if detail.remaining() == 0 && detail.held() > 0 {
                                    span.badge { "In baskets — some may come back" }
                                } @else if detail.remaining() == 0 {
                                    span.badge.sold-out { "Sold out" }
                                } @else {
                                    span.badge { (detail.remaining()) " of " (detail.capacity()) " left" }
                                }
                                " Sale opens " (event_time(&event.zone, event.sale_opens_at))
                            }
                        }
                    }
                }
                @if let Some(next) = next {
                    nav.pages aria-label="More events" {
                        a rel="next" href={ "/?after=" (next.encode()) } { "Later events →" }
                    }
                }
            }
        },
    )
}

/// What the buyer typed, kept when the form comes back with an error.
#[derive(Debug, Clone, Default)]
pub struct BuyForm {
    pub ticket_type_id: String,
    pub quantity: String,
    pub email: String,
    pub idempotency_key: String,
    /// From the field, or from the link's `?code=`.
    pub presale_code: String,
    pub error: Option<FormError>,
}

/// A queued event's room, as this buyer sees it.
#[derive(Debug, Clone, Copy)]
pub struct RoomGate<'a> {
    pub room: &'a crate::waiting_room::Room,
    /// The buyer's pass is valid: the buy form shows.
    pub holds_pass: bool,
    pub can_join: bool,
    pub in_queue: bool,
}

pub fn page(
    ctx: &PageContext,
    detail: &EventDetail,
    now: OffsetDateTime,
    form: &BuyForm,
    room: Option<RoomGate<'_>>,
) -> Markup {
    let event = &detail.event;
    let state = event.sale_state(now);
    // Behind a room, the form (and with it the ticket type ids) only for
    // a buyer who holds a pass.
    let gated = room.filter(|gate| !gate.holds_pass);
    layout(
        ctx,
        &event.title,
        html! {
            article.event {
                h1 { (event.title) }
                p.meta { (event_time(&event.zone, event.starts_at)) " · " (event.venue) }
                @if !event.description.is_empty() {
                    p.description { (event.description) }
                }
                h2 { "Tickets" }
                ul.ticket-types {
                    @for tt in &detail.ticket_types { (ticket_type_row(tt)) }
                }
                // The states below that show no form still show why a post failed.
                @if !(state == SaleState::NotOpenYet || (state == SaleState::Open && !detail.sold_out())) {
                    (error_notice(form.error.as_ref()))
                }
                @if let Some(gate) = gated {
                    @if matches!(state, SaleState::NotOpenYet | SaleState::Open) && !detail.sold_out() {
                        (super::queue::panel(ctx, gate.room, &event.zone, gate.can_join, gate.in_queue))
                    }
                }
                @match state {
                    SaleState::Cancelled => p.notice.error { "This event was cancelled." },
                    SaleState::Draft => p.notice { "This event is not published." },
                    SaleState::NotOpenYet => {
                        (error_notice(form.error.as_ref()))
                        // Millisecond times from the server's clock, so the
                        // script counts down against it, not the buyer's.
                        p.notice #countdown
                            data-opens-at=(event.sale_opens_at.unix_timestamp_nanos() / 1_000_000)
                            data-server-now=(now.unix_timestamp_nanos() / 1_000_000) {
                            "The sale opens " (event_time(&event.zone, event.sale_opens_at)) "."
                        }
                    },
                    SaleState::Closed => p.notice { "The sale for this event has closed." },
                    SaleState::Open if detail.sold_out() && detail.held() > 0 => p.notice role="status" {
                        "All tickets are in baskets — some may come back. Buyers have a few minutes to confirm theirs; "
                        "tickets not confirmed in time go to the waiting list, or back on sale here."
                    },
                    SaleState::Open if detail.sold_out() => p.notice.sold-out role="status" { "Sold out. Every ticket has found its owner." },
                    SaleState::Open if gated.is_some() => {},
                    SaleState::Open => (buy_form(ctx, detail, form)),
                }
                @if state == SaleState::Open {
                    (super::waitlist::join_form(ctx, detail, &super::waitlist::JoinForm::default()))
                }
            }
        },
    )
}

fn ticket_type_row(tt: &TicketType) -> Markup {
    html! {
        li.ticket-type {
            span.name { (tt.name) }
            span.price { (format_price(tt.price_minor, &tt.currency)) }
            @if tt.remaining == 0 && tt.held > 0 {
                span.badge { "In baskets — some may come back" }
            } @else if tt.remaining == 0 {
                span.badge.sold-out { "Sold out" }
            } @else {
                span.badge { (tt.remaining) " of " (tt.capacity) " left" }
            }
        }
    }
}

fn buy_form(ctx: &PageContext, detail: &EventDetail, form: &BuyForm) -> Markup {
    let error = form.error.as_ref();
    let available: Vec<&TicketType> = detail
        .ticket_types
        .iter()
        .filter(|t| t.remaining > 0)
        .collect();
    let selected = if available
        .iter()
        .any(|t| t.id.to_string() == form.ticket_type_id)
    {
        form.ticket_type_id.clone()
    } else {
        available
            .first()
            .map(|t| t.id.to_string())
            .unwrap_or_default()
    };
    let max_per_order = available.iter().map(|t| t.max_per_order).max().unwrap_or(1);
    html! {
        form.buy.card method="post" action={ "/events/" (detail.event.id) "/orders" } data-once {
            h2 { "Buy tickets" }
            (csrf_field(ctx))
            (error_notice(error))
            fieldset aria-invalid=[invalid(error, "ticket_type_id")] {
                legend { "Ticket type" }
                @for tt in &available {
                    label.choice {
                        input type="radio" name="ticket_type_id" value=(tt.id) required
                            checked[tt.id.to_string() == selected];
                        " " (tt.name) " — " (format_price(tt.price_minor, &tt.currency))
                        small { " (up to " (tt.max_per_order) " per order)" }
                    }
                }
            }
            label for="quantity" { "How many" }
            input #quantity type="number" name="quantity" min="1" max=(max_per_order) required
                value=(if form.quantity.is_empty() { "1" } else { &form.quantity })
                aria-invalid=[invalid(error, "quantity")];
            label for="email" { "Email" }
            input #email type="email" name="email" autocomplete="email" required
                value=(form.email) aria-invalid=[invalid(error, "email")];
            label for="presale_code" { "Presale code (if you have one)" }
            input #presale_code type="text" name="presale_code" autocomplete="off" spellcheck="false"
                value=(form.presale_code) aria-invalid=[invalid(error, "presale_code")];
            input type="hidden" name="idempotency_key" value=(form.idempotency_key);
            button type="submit" { "Buy tickets" }
        }
    }
}
