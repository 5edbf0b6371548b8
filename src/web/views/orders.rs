use maud::{Markup, html};

use time::OffsetDateTime;

use super::PageContext;
use super::{csrf_field, event_time, layout_refreshing, rfc3339};
use crate::{
    db::orders::{OrderContext, Ticket},
    domain::{CancelSecret, OrderStatus, format_price},
    payments::state::PaymentState,
    sale::Order,
};

/// What the visitor came with: the cancel secret from the page's URL
/// (`?s=`; without it there is no cancel button), and the query carrying
/// their proof (`s=` or `t=`) on to the downloads.
pub struct Visitor<'a> {
    pub secret: Option<&'a CancelSecret>,
    pub proof_query: &'a str,
}

/// The order page. `tickets` is empty
/// unless the visitor proved the order (`db::orders::tickets`). A held
/// order shows when its hold ends, and no tickets.
pub fn page(
    ctx: &PageContext,
    order: &Order,
    about: &OrderContext,
    tickets: &[Ticket],
    visitor: &Visitor<'_>,
    payment: &PaymentState,
    now: OffsetDateTime,
) -> Markup {
    let (secret, proof_query) = (visitor.secret, visitor.proof_query);
    let confirmed = order.status == OrderStatus::Confirmed;
    let total = order.unit_price_minor * i64::from(order.quantity);
    let tickets_word = if order.quantity == 1 {
        "ticket"
    } else {
        "tickets"
    };
    // A held page reloads itself about when the hold ends (no script needed).
    let refresh = order
        .hold_expires_at
        .filter(|_| order.status == OrderStatus::Held)
        .map(|at| (at - now).whole_seconds().clamp(5, 600) as u32 + 1);
    layout_refreshing(
        ctx,
        "Your order",
        refresh,
        html! {
            article.order.card {
                @match order.status {
                    OrderStatus::Confirmed => {
                        h1 { "You have " (order.quantity) " " (tickets_word) }
                        p.notice.success role="status" { "Order confirmed. Keep this page's address: it is your proof of purchase." }
                    }
                    OrderStatus::Held if payment.takes_payment => {
                        h1 { (order.quantity) " " (tickets_word) " held for you: pay to get them" }
                        p.notice role="status" {
                            "Pay " strong { (format_price(total, &order.currency)) }
                            @if let Some(at) = order.hold_expires_at {
                                " before " time datetime=(rfc3339(at)) data-countdown
                                    data-server-now=(now.unix_timestamp_nanos() / 1_000_000) { (about.zone.format(at)) }
                            }
                            "; until then your tickets are only held, and then they go back on sale."
                        }
                        @if let Some(secret) = secret {
                            p { a.button href={ "/orders/" (order.id) "/pay?s=" (secret.as_str()) } { "Pay now" } }
                        } @else {
                            p.hint { "Open the link we mailed to " strong { (order.email) } " to pay." }
                        }
                    }
                    OrderStatus::Held => {
                        h1 { (order.quantity) " " (tickets_word) " held for you" }
                        p.notice role="status" {
                            "Check your mailbox: we sent a confirmation link to " strong { (order.email) } ". "
                            "Follow it"
                            @if let Some(at) = order.hold_expires_at {
                                " before " time datetime=(rfc3339(at)) data-countdown
                                    data-server-now=(now.unix_timestamp_nanos() / 1_000_000) { (about.zone.format(at)) }
                            }
                            " to get your tickets; until then they are only held, and then they go back on sale."
                        }
                    }
                    OrderStatus::Expired => {
                        h1 { "Hold expired" }
                        p.notice role="status" {
                            "This order was not confirmed in time; its tickets went back on sale. "
                            a href={ "/events/" (about.event_id) } { "Try again" } "."
                        }
                    }
                    OrderStatus::Cancelled => {
                        h1 { "Order cancelled" }
                        p.notice role="status" {
                            "This order was cancelled"
                            @if let Some(at) = about.cancelled_at { " on " (about.zone.format(at)) }
                            "; its tickets went back on sale."
                        }
                    }
                }
                dl {
                    dt { "Event" } dd { a href={ "/events/" (about.event_id) } { (about.event_title) } }
                    dt { "When" } dd { (event_time(&about.zone, about.starts_at)) }
                    dt { "Where" } dd { (about.venue) }
                    dt { "Tickets" } dd { (order.quantity) " × " (about.ticket_type_name) }
                    dt { "Total" } dd { (format_price(total, &order.currency)) }
                    @if payment.takes_payment {
                        dt { "Payment" } dd { (payment_words(payment)) }
                    }
                    dt { "Email" } dd { (order.email) }
                    dt { "Order" } dd { code { (order.id) } }
                    dt { "Ordered" } dd { (about.zone.format(order.created_at)) }
                }
                @if order.status == OrderStatus::Held {
                    @if let Some(secret) = secret {
                        (cancel_form(ctx, order, secret, "Release these tickets"))
                    }
                }
                @if confirmed && tickets.is_empty() {
                    p.hint {
                        "The ticket codes show to whoever proves this order: open it from the page "
                        "you reached when you bought, or from the link we mailed to you."
                    }
                }
                @if confirmed && !tickets.is_empty() {
                    h2 { "Your tickets" }
                    p.hint { "Show one code per person at the door, on screen or printed." }
                    p.downloads {
                        a.button href={ "/orders/" (order.id) "/tickets.pdf?" (proof_query) } download { "Download the tickets (PDF)" }
                        " "
                        a.button.secondary href={ "/orders/" (order.id) "/event.ics?" (proof_query) } download { "Add to calendar (.ics)" }
                    }
                    ol.tickets {
                        @for ticket in tickets {
                            li.ticket {
                                img src=(qr_data_uri(&ticket.code)) width="160" height="160"
                                    alt={ "QR code for ticket " (ticket.position) };
                                div {
                                    strong { "Ticket " (ticket.position) " of " (order.quantity) }
                                    br;
                                    (about.ticket_type_name)
                                    br;
                                    code.ticket-code { (grouped(&ticket.code)) }
                                }
                            }
                        }
                    }
                    @if let Some(secret) = secret {
                        (cancel_form(ctx, order, secret, "Cancel this order"))
                    } @else {
                        p.hint { "To cancel, open this order from the link you got when you bought it." }
                    }
                }
            }
        },
    )
}

/// "paid", "refunded", … for the order's payment line.
fn payment_words(payment: &PaymentState) -> &'static str {
    match (payment.status.as_deref(), payment.refund.as_deref()) {
        (_, Some("done")) => "refunded in full",
        (_, Some(_)) => "paid; a full refund is under way",
        (Some("succeeded"), None) => "paid",
        (Some("failed"), _) => "not paid",
        _ => "not paid yet",
    }
}

fn cancel_form(ctx: &PageContext, order: &Order, secret: &CancelSecret, label: &str) -> Markup {
    html! {
        form method="post" action={ "/orders/" (order.id) "/cancel" } data-once data-confirm="Cancel this order and release its tickets?" {
            (csrf_field(ctx))
            input type="hidden" name="s" value=(secret.as_str());
            button.secondary type="submit" { (label) }
        }
    }
}

/// The ticket code as a QR code: an SVG rendered on the server, embedded as
/// a data URI (allowed by the CSP's `img-src data:`), so no markup of ours
/// is built from strings.
fn qr_data_uri(code: &str) -> String {
    use base64::Engine as _;
    match qrcode::QrCode::new(code.as_bytes()) {
        Ok(qr) => {
            let svg = qr
                .render::<qrcode::render::svg::Color<'_>>()
                .min_dimensions(160, 160)
                .quiet_zone(true)
                .build();
            format!(
                "data:image/svg+xml;base64,{}",
                base64::engine::general_purpose::STANDARD.encode(svg)
            )
        }
        // A ticket code always fits in a QR code; show the text code alone if not.
        Err(_) => String::new(),
    }
}

/// "ABCD EFGH …": easier to read out at the door than 32 characters in a row.
fn grouped(code: &str) -> String {
    code.as_bytes()
        .chunks(4)
        .map(|chunk| String::from_utf8_lossy(chunk).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}
