//! The dashboard's sales chart: inline SVG written with maud like any other
//! markup; its numbers come from the database and its text is escaped.

use maud::{Markup, html};
use time::{OffsetDateTime, UtcOffset, macros::format_description};

use super::rfc3339;
use crate::domain::SalesChart;

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
pub fn sales_chart(chart: &SalesChart) -> Markup {
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
