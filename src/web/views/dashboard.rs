//! The organizer's dashboard for one event, and its CSV export.
//!
//! The sales chart is inline SVG written with maud like any other markup:
//! its numbers come from the database and its text is escaped by maud.

use std::borrow::Cow;

use maud::{Markup, html};
use time::{
    OffsetDateTime, UtcOffset, format_description::well_known::Rfc3339, macros::format_description,
};
use uuid::Uuid;

use super::{
    format_time, layout,
    organizer::{EventPage, status_bar},
};
use crate::{
    db::{
        dashboard::{
            Dashboard, ExportRow, OrdersPage, Revenue, SalesChart, SalesTotals, TicketTypeSales,
        },
        events::{EventDetail, SaleState},
    },
    domain::{decimal_price, format_price},
    error::AppError,
    web::extract::PageContext,
};

pub fn page(
    ctx: &PageContext,
    detail: &EventDetail,
    state: SaleState,
    dashboard: &Dashboard,
) -> Markup {
    let event = &detail.event;
    layout(
        ctx,
        &event.title,
        html! {
            p.breadcrumb { a href="/organizer" { "← Your events" } }
            h1 { (event.title) }
            p.meta { (format_time(event.starts_at)) " · " (event.venue) }
            (status_bar(ctx, event.id, state, EventPage::Dashboard))
            section aria-labelledby="sales-heading" {
                h2 #sales-heading { "Sales" }
                (sales_table(&dashboard.ticket_types, &dashboard.totals))
            }
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
                (orders(event.id, &dashboard.orders))
            }
        },
    )
}

/// Money for the sales table: "0.00 EUR" rather than `format_price`'s "Free".
fn money(revenue: &Revenue) -> String {
    if revenue.minor == 0 {
        format!("{} {}", decimal_price(0), revenue.currency)
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
            div.table-scroll {
                table.events.sales {
                    caption.visually-hidden { "Tickets sold, remaining and revenue per ticket type" }
                    thead {
                        tr {
                            th scope="col" { "Ticket type" }
                            th.num scope="col" { "Sold" }
                            th.num scope="col" { "Remaining" }
                            th.num scope="col" { "Capacity" }
                            th.num scope="col" { "Revenue" }
                        }
                    }
                    tbody {
                        @for tt in ticket_types {
                            tr data-ticket-type=(tt.id) {
                                th scope="row" { (tt.name) }
                                td.num.sold { (tt.sold) }
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
                            td.num.remaining { (totals.remaining) }
                            td.num.capacity { (totals.capacity) }
                            td.num.revenue { (revenue_cell(&totals.revenue)) }
                        }
                    }
                }
            }
        }
    }
}

/// A dashboard link to one page of the order list, keeping the search.
pub fn orders_href(event_id: Uuid, query: &str, page: i64) -> String {
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

fn orders(event_id: Uuid, orders: &OrdersPage) -> Markup {
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
            div.table-scroll {
                table.events.orders {
                    caption.visually-hidden { "Orders, newest first" }
                    thead {
                        tr {
                            th scope="col" { "Ordered" }
                            th scope="col" { "Email" }
                            th scope="col" { "Ticket type" }
                            th.num scope="col" { "Qty" }
                            th scope="col" { "Status" }
                            th.num scope="col" { "Total" }
                            th scope="col" { "Order" }
                        }
                    }
                    tbody {
                        @for order in &orders.rows {
                            tr data-order=(order.id) {
                                td { time datetime=(rfc3339(order.created_at)) { (format_time(order.created_at)) } }
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
                            }
                        }
                    }
                }
            }
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

fn short_id(id: Uuid) -> String {
    id.simple().to_string().chars().take(8).collect()
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.to_offset(UtcOffset::UTC)
        .format(&Rfc3339)
        .unwrap_or_default()
}

// The chart's drawing area, in SVG user units.
const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 260.0;
const LEFT: f64 = 52.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 16.0;
const BOTTOM: f64 = 40.0;

/// A bucket's start as an axis label: the time of day for buckets shorter
/// than a day, the date otherwise (UTC).
fn bucket_label(chart: &SalesChart, at: OffsetDateTime) -> String {
    let at = at.to_offset(UtcOffset::UTC);
    let formatted = if chart.bucket.width < time::Duration::days(1) {
        at.format(format_description!(
            "[day padding:none] [month repr:short] [hour]:[minute]"
        ))
    } else {
        at.format(format_description!(
            "[day padding:none] [month repr:short] [year]"
        ))
    };
    formatted.unwrap_or_default()
}

/// Cumulative confirmed tickets, one point per bucket, as inline SVG.
fn sales_chart(chart: &SalesChart) -> Markup {
    let points = &chart.points;
    let n = points.len();
    let total = points.last().map_or(0, |p| p.cumulative);
    let top = total.max(1);
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x = |i: usize| {
        if n <= 1 {
            LEFT + plot_w / 2.0
        } else {
            LEFT + plot_w * i as f64 / (n - 1) as f64
        }
    };
    let y = |value: i64| TOP + plot_h * (1.0 - value as f64 / top as f64);
    let coordinates: Vec<(f64, f64)> = points
        .iter()
        .enumerate()
        .map(|(i, p)| (x(i), y(p.cumulative)))
        .collect();
    // The line rises from zero (nothing sold before the first sale); a single
    // bucket is drawn as a step across the plot rather than a lone dot.
    let mut line_points = vec![(LEFT, y(0))];
    line_points.extend(coordinates.iter().copied());
    if n == 1 {
        line_points.push((WIDTH - RIGHT, y(total)));
    }
    let polyline = line_points
        .iter()
        .map(|(px, py)| format!("{px:.1},{py:.1}"))
        .collect::<Vec<_>>()
        .join(" ");
    let mut y_ticks = vec![0, total / 2, total];
    y_ticks.dedup();
    let mut x_ticks = vec![0, n / 2, n.saturating_sub(1)];
    x_ticks.dedup();
    let first = points
        .first()
        .map(|p| bucket_label(chart, p.at))
        .unwrap_or_default();
    let last = points
        .last()
        .map(|p| bucket_label(chart, p.at))
        .unwrap_or_default();
    let summary = format!(
        "Tickets sold over time: {total} in total, from {first} to {last} (UTC), one point per {}.",
        chart.bucket.label
    );
    html! {
        figure.chart {
            svg.sales-chart xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (WIDTH) " " (HEIGHT) }
                role="img" aria-label=(summary) data-bucket=(chart.bucket.label) data-total=(total) {
                title { (summary) }
                g.grid {
                    @for tick in &y_ticks {
                        line x1=(LEFT) x2=(WIDTH - RIGHT) y1=(format!("{:.1}", y(*tick))) y2=(format!("{:.1}", y(*tick))) {}
                    }
                }
                g.axes {
                    line x1=(LEFT) x2=(LEFT) y1=(TOP) y2=(HEIGHT - BOTTOM) {}
                    line x1=(LEFT) x2=(WIDTH - RIGHT) y1=(HEIGHT - BOTTOM) y2=(HEIGHT - BOTTOM) {}
                }
                g.labels.y-labels {
                    @for tick in &y_ticks {
                        text x=(LEFT - 8.0) y=(format!("{:.1}", y(*tick) + 4.0)) text-anchor="end" { (tick) }
                    }
                }
                g.labels.x-labels {
                    @for &i in &x_ticks {
                        @if let Some(point) = points.get(i) {
                            text x=(format!("{:.1}", x(i))) y=(HEIGHT - BOTTOM + 20.0)
                                text-anchor=(if n <= 1 { "middle" } else if i == 0 { "start" } else if i + 1 == n { "end" } else { "middle" }) {
                                (bucket_label(chart, point.at))
                            }
                        }
                    }
                }
                polyline.line points=(polyline) {}
                g.points {
                    @for (point, (px, py)) in points.iter().zip(&coordinates) {
                        circle.point cx=(format!("{px:.1}")) cy=(format!("{py:.1}")) r="3"
                            data-at=(rfc3339(point.at)) data-sold=(point.sold) data-cumulative=(point.cumulative) {
                            title { (bucket_label(chart, point.at)) ": " (point.sold) " sold, " (point.cumulative) " in total" }
                        }
                    }
                }
            }
            figcaption { "Cumulative confirmed tickets, one point per " (chart.bucket.label) " (UTC)." }
        }
        details.chart-data {
            summary { "The chart's numbers" }
            div.table-scroll {
                table.events {
                    thead { tr { th scope="col" { "From (UTC)" } th.num scope="col" { "Sold" } th.num scope="col" { "In total" } } }
                    tbody {
                        @for point in points {
                            tr {
                                td { (bucket_label(chart, point.at)) }
                                td.num { (point.sold) }
                                td.num { (point.cumulative) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The columns of the CSV export, in order.
pub const CSV_HEADER: [&str; 9] = [
    "order_id",
    "created_at",
    "email",
    "ticket_type",
    "quantity",
    "unit_price_minor",
    "currency",
    "status",
    "ticket_codes",
];

/// A cell that a spreadsheet would run as a formula (or that some treat as
/// one) gets a leading `'`, which spreadsheets show as text.
pub fn neutralise_cell(cell: &str) -> Cow<'_, str> {
    if cell.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        Cow::Owned(format!("'{cell}"))
    } else {
        Cow::Borrowed(cell)
    }
}

/// Every order as CSV (RFC 4180, quoted where needed, UTF-8), every cell
/// neutralised against formula injection.
pub fn orders_csv(rows: &[ExportRow]) -> Result<Vec<u8>, AppError> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    writer
        .write_record(CSV_HEADER)
        .map_err(AppError::internal)?;
    for row in rows {
        let created_at = row
            .created_at
            .to_offset(UtcOffset::UTC)
            .format(&Rfc3339)
            .map_err(AppError::internal)?;
        let cells = [
            row.id.to_string(),
            created_at,
            row.email.clone(),
            row.ticket_type.clone(),
            row.quantity.to_string(),
            row.unit_price_minor.to_string(),
            row.currency.clone(),
            row.status.clone(),
            row.ticket_codes.clone(),
        ];
        writer
            .write_record(cells.iter().map(|cell| neutralise_cell(cell).into_owned()))
            .map_err(AppError::internal)?;
    }
    writer
        .into_inner()
        .map_err(|err| AppError::internal(err.into_error()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formula_cells_are_neutralised() {
        for bad in ["=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx"] {
            assert_eq!(neutralise_cell(bad), format!("'{bad}"), "{bad:?}");
        }
        for fine in ["ada@example.org", "Standing", "1", "", " =x"] {
            assert_eq!(neutralise_cell(fine), fine);
        }
    }

    #[test]
    fn order_links_keep_the_search() {
        let id = Uuid::nil();
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
