//! The organizer's dashboard for one event; its chart is [`super::chart`].

use maud::{Markup, html};

use super::{
    PageContext,
    chart::sales_chart,
    csrf_field,
    door::{DoorPanel, panel as door_panel},
    event_time, layout,
    organizer::{EventPage, status_bar},
};
use crate::{
    db::{
        dashboard::{Dashboard, OrdersPage, Revenue, SalesTotals, TicketTypeSales},
        events::EventDetail,
    },
    domain::{EventId, OrderId, OrderStatus, SaleState, Zone, decimal_price, format_price},
    waiting_room::RoomStatus,
};

pub fn page(
    ctx: &PageContext,
    detail: &EventDetail,
    state: SaleState,
    dashboard: &Dashboard,
    door: &DoorPanel<'_>,
    room: Option<&RoomStatus>,
) -> Markup {
    let event = &detail.event;
    layout(
        ctx,
        &event.title,
        html! {
            p.breadcrumb { a href="/organizer" { "← Your events" } }
            h1 { (event.title) }
            p.meta { (event_time(&event.zone, event.starts_at)) " · " (event.venue) }
            (status_bar(ctx, event.id, state, EventPage::Dashboard))
            section aria-labelledby="sales-heading" {
                h2 #sales-heading { "Sales" }
                (sales_table(&dashboard.ticket_types, &dashboard.totals))
                (payments_table(&dashboard.totals.payments))
            }
            @if let Some(room) = room {
                (room_panel(ctx, event.id, room))
            }
            (door_panel(ctx, event.id, door))
            section aria-labelledby="chart-heading" {
                h2 #chart-heading { "Tickets sold over time" }
                @match &dashboard.chart {
                    Some(chart) if !chart.points.is_empty() => (sales_chart(chart)),
                    _ => p.empty { "No tickets sold yet; the chart starts with the first sale." },
                }
            }
            section aria-labelledby="orders-heading" {
                div.heading-row {
                    h2 #orders-heading { "Orders" }
                    a.button.secondary href={ "/organizer/events/" (event.id) "/orders.csv" } download {
                        "Download all orders (CSV)"
                    }
                }
                (orders(ctx, event.id, &event.zone, &dashboard.orders))
            }
        },
    )
}

/// "3 min 20 s", "45 s": a duration for the room panel.
pub fn duration_in_words(secs: i64) -> String {
    match secs {
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min {} s", s / 60, s % 60),
        s => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

/// The waiting room's live figures, and pause or resume. static/app.js
/// refreshes the figures every few seconds from `data-live`; without it
/// they are as of the page's load.
fn room_panel(ctx: &PageContext, event_id: EventId, status: &RoomStatus) -> Markup {
    let s = &status.room.settings;
    let f = &status.figures;
    let clear = status
        .estimated_secs_to_clear()
        .map_or_else(|| "—".to_owned(), duration_in_words);
    let state = match (s.enabled, s.paused) {
        (false, _) => "off",
        (true, true) => "paused",
        (true, false) => "admitting",
    };
    html! {
        section #waiting-room .room-panel aria-labelledby="room-heading"
            data-live={ "/organizer/events/" (event_id) "/waiting-room.json" } {
            div.heading-row {
                h2 #room-heading { "Waiting room" }
                a href={ "/organizer/events/" (event_id) "/edit#waiting-room" } { "Settings" }
            }
            p.meta {
                "Room " span.badge.(state) data-figure="state" { (state) }
                " · rate: " (s.admit_per_minute.map_or_else(|| "—".to_owned(), |r| format!("{r} a minute")))
                " · cap on live passes: " (s.max_active.map_or_else(|| "—".to_owned(), |m| m.to_string()))
                " · a pass lasts " (s.pass_minutes) " min"
            }
            dl.figures {
                div { dt { "In the queue" } dd.num data-figure="waiting" { (f.waiting) } }
                div { dt { "Admitted in the last minute" } dd.num data-figure="admitted_last_minute" { (f.admitted_last_minute) } }
                div { dt { "Admitted so far" } dd.num data-figure="admitted" { (f.admitted) } }
                div { dt { "Live passes" } dd.num data-figure="active_passes" { (f.active_passes) } }
                div { dt { "Estimated time to clear" } dd.num data-figure="estimated_secs_to_clear" { (clear) } }
            }
            @if s.enabled {
                form.inline method="post" action={ "/organizer/events/" (event_id) "/waiting-room/admission" } data-once {
                    (csrf_field(ctx))
                    @if s.paused {
                        input type="hidden" name="paused" value="false";
                        button type="submit" { "Resume admission" }
                    } @else {
                        input type="hidden" name="paused" value="true";
                        button.secondary type="submit" { "Pause admission" }
                    }
                }
                p.hint { "Pausing stops letting people in; the queue keeps its order, and passes already given stay good until they expire." }
            }
        }
    }
}

/// Money for the sales table: "0.00 EUR" rather than `format_price`'s "Free".
fn money(revenue: &Revenue) -> String {
    if revenue.minor == 0 {
        format!(
            "{} {}",
            decimal_price(0, &revenue.currency),
            revenue.currency
        )
    } else {
        format_price(revenue.minor, &revenue.currency)
    }
}

fn revenue_cell(revenue: &[Revenue]) -> Markup {
    html! {
        @if revenue.is_empty() {
            "—"
        } @else {
            @for (i, r) in revenue.iter().enumerate() {
                @if i > 0 { br; }
                (money(r))
            }
        }
    }
}

fn sales_table(ticket_types: &[TicketTypeSales], totals: &SalesTotals) -> Markup {
    html! {
        @if ticket_types.is_empty() {
            p.empty { "This event has no ticket types." }
        } @else {
            (data_table(
                "sales",
                "Tickets sold, held unconfirmed, remaining and revenue per ticket type",
                &[("Ticket type", false), ("Sold", true), ("Checked in", true), ("In unconfirmed holds", true), ("Remaining", true), ("Capacity", true), ("Revenue", true)],
                html! {
                    tbody {
                        @for tt in ticket_types {
                            tr data-ticket-type=(tt.id) {
                                th scope="row" { (tt.name) }
                                td.num.sold { (tt.sold) }
                                td.num.checked-in { (tt.checked_in) " / " (tt.sold) }
                                td.num.held { (tt.held) }
                                td.num.remaining { (tt.remaining) }
                                td.num.capacity { (tt.capacity) }
                                td.num.revenue { (revenue_cell(&tt.revenue)) }
                            }
                        }
                    }
                    tfoot {
                        tr.totals {
                            th scope="row" { "Total" }
                            td.num.sold { (totals.sold) }
                            td.num.checked-in { (totals.checked_in) " / " (totals.sold) }
                            td.num.held { (totals.held) }
                            td.num.remaining { (totals.remaining) }
                            td.num.capacity { (totals.capacity) }
                            td.num.revenue { (revenue_cell(&totals.revenue)) }
                        }
                    }
                },
            ))
        }
    }
}

/// Stripe's payments of the event, per currency (none: no table).
fn payments_table(payments: &[crate::db::dashboard::PaymentTotals]) -> Markup {
    html! {
        @if !payments.is_empty() {
            h3 { "Payments" }
            (data_table(
                "payments",
                "Paid, pending, refunded and failed amounts per currency",
                &[("Currency", false), ("Paid", true), ("Pending", true), ("Refunded", true), ("Being refunded", true), ("Failed", true)],
                html! {
                    tbody {
                        @for p in payments {
                            tr {
                                th scope="row" { (p.currency) }
                                td.num.paid { (decimal_price(p.paid_minor, &p.currency)) }
                                td.num.pending { (decimal_price(p.pending_minor, &p.currency)) }
                                td.num.refunded { (decimal_price(p.refunded_minor, &p.currency)) }
                                td.num.refunding { (decimal_price(p.refunding_minor, &p.currency)) }
                                td.num.failed { (decimal_price(p.failed_minor, &p.currency)) }
                            }
                        }
                    }
                },
            ))
        }
    }
}

/// A table that scrolls sideways on narrow screens, with a caption for
/// screen readers and one header row of (name, numeric) columns.
fn data_table(class: &str, caption: &str, columns: &[(&str, bool)], rows: Markup) -> Markup {
    html! {
        div.table-scroll {
            table.events.(class) {
                caption.visually-hidden { (caption) }
                thead {
                    tr {
                        @for (name, numeric) in columns {
                            th.num[*numeric] scope="col" { (name) }
                        }
                    }
                }
                (rows)
            }
        }
    }
}

/// A dashboard link to one page of the order list, keeping the search.
pub fn orders_href(event_id: EventId, query: &str, page: i64) -> String {
    let mut params = form_urlencoded::Serializer::new(String::new());
    if !query.is_empty() {
        params.append_pair("q", query);
    }
    params.append_pair("page", &page.to_string());
    format!(
        "/organizer/events/{event_id}?{}#orders-heading",
        params.finish()
    )
}

fn orders(ctx: &PageContext, event_id: EventId, zone: &Zone, orders: &OrdersPage) -> Markup {
    let query = orders.query.as_str();
    html! {
        form.search method="get" action={ "/organizer/events/" (event_id) "#orders-heading" } role="search" {
            label for="q" { "Search orders by email" }
            div.search-row {
                input #q type="search" name="q" value=(query) maxlength="200" autocomplete="off"
                    placeholder="ada@example.org";
                button.small type="submit" { "Search" }
                @if !query.is_empty() {
                    a href={ "/organizer/events/" (event_id) "#orders-heading" } { "Show all" }
                }
            }
        }
        p.meta role="status" {
            (orders.matching) " " (if orders.matching == 1 { "order" } else { "orders" })
            @if !query.is_empty() { " matching “" (query) "”" }
            @if orders.pages > 1 { " · page " (orders.page) " of " (orders.pages) }
        }
        @if orders.rows.is_empty() {
            p.empty {
                @if query.is_empty() { "No orders yet." } @else { "No orders match this search." }
            }
        } @else {
            (data_table(
                "orders",
                "Orders, newest first",
                &[
                    ("Ordered", false), ("Email", false), ("Ticket type", false), ("Qty", true),
                    ("Status", false), ("Total", true), ("Order", false), ("Tickets", false),
                ],
                html! {
                    tbody {
                        @for order in &orders.rows {
                            tr data-order=(order.id) {
                                td { (event_time(zone, order.created_at)) }
                                td { (order.email) }
                                td { (order.ticket_type) }
                                td.num { (order.quantity) }
                                td { span.badge.(order.status) { (order.status) } }
                                td.num { (format_price(order.total_minor(), &order.currency)) }
                                td {
                                    a href={ "/orders/" (order.id) } aria-label={ "Order " (order.id) } {
                                        code { (short_id(order.id)) }
                                    }
                                }
                                td {
                                    @if order.status == OrderStatus::Confirmed {
                                        form.inline method="post" action={ "/organizer/events/" (event_id) "/orders/" (order.id) "/resend" } data-once {
                                            (csrf_field(ctx))
                                            button.secondary.small type="submit" title="Mail this order's tickets to its buyer again" { "Resend" }
                                        }
                                    }
                                }
                            }
                        }
                    }
                },
            ))
        }
        @if orders.pages > 1 {
            nav.pagination aria-label="Order pages" {
                @if orders.page > 1 {
                    a rel="prev" href=(orders_href(event_id, query, orders.page - 1)) { "← Previous" }
                }
                span { "Page " (orders.page) " of " (orders.pages) }
                @if orders.page < orders.pages {
                    a rel="next" href=(orders_href(event_id, query, orders.page + 1)) { "Next →" }
                }
            }
        }
    }
}

fn short_id(id: OrderId) -> String {
    id.get().simple().to_string().chars().take(8).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_links_keep_the_search() {
        let id = EventId::from(uuid::Uuid::nil());
        assert_eq!(
            orders_href(id, "a&b c", 2),
            format!("/organizer/events/{id}?q=a%26b+c&page=2#orders-heading")
        );
        assert_eq!(
            orders_href(id, "", 3),
            format!("/organizer/events/{id}?page=3#orders-heading")
        );
    }
}
