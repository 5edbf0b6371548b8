use maud::{Markup, html};

use super::{format_time, layout};
use crate::{db::orders::OrderPage, domain::format_price};

pub fn page(order: &OrderPage) -> Markup {
    let confirmed = order.status == "confirmed";
    let total = order.unit_price_minor * i64::from(order.quantity);
    layout(
        "Your order",
        html! {
            article.order.card {
                @if confirmed {
                    h1 { "You have " (order.quantity) " " (if order.quantity == 1 { "ticket" } else { "tickets" }) }
                    p.notice.success role="status" { "Order confirmed. Keep this page's address: it is your proof of purchase." }
                } @else {
                    h1 { "Order cancelled" }
                    p.notice role="status" {
                        "This order was cancelled"
                        @if let Some(at) = order.cancelled_at { " on " (format_time(at)) }
                        "; its tickets went back on sale."
                    }
                }
                dl {
                    dt { "Event" } dd { a href={ "/events/" (order.event_id) } { (order.event_title) } }
                    dt { "When" } dd { (format_time(order.starts_at)) }
                    dt { "Where" } dd { (order.venue) }
                    dt { "Tickets" } dd { (order.quantity) " × " (order.ticket_type_name) }
                    dt { "Total" } dd { (format_price(total, &order.currency)) }
                    dt { "Email" } dd { (order.email) }
                    dt { "Order" } dd { code { (order.id) } }
                    dt { "Ordered" } dd { (format_time(order.created_at)) }
                }
                @if confirmed {
                    form method="post" action={ "/orders/" (order.id) "/cancel" } data-once data-confirm="Cancel this order and release its tickets?" {
                        button.danger type="submit" { "Cancel order" }
                    }
                }
            }
        },
    )
}
