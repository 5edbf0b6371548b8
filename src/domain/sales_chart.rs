//! The dashboard's chart of tickets sold over time: how wide a point is,
//! so that any span of sales fits in at most [`MAX_CHART_POINTS`] points.

use time::{Duration, OffsetDateTime};

/// The width of one point of the sales chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    pub width: Duration,
    /// "minute", "5 minutes", "hour", "day", ...
    pub label: &'static str,
}

/// Bucket widths the chart may use, narrowest first. All are whole
/// minutes, hours or days (fixed lengths: no months, no DST), and all divide
/// a day or are whole days, so buckets start on the clock's round numbers.
const BUCKETS: &[(Duration, &str)] = &[
    (Duration::minutes(1), "minute"),
    (Duration::minutes(5), "5 minutes"),
    (Duration::minutes(15), "15 minutes"),
    (Duration::hours(1), "hour"),
    (Duration::hours(3), "3 hours"),
    (Duration::hours(6), "6 hours"),
    (Duration::hours(12), "12 hours"),
    (Duration::days(1), "day"),
    (Duration::days(7), "week"),
    (Duration::days(30), "30 days"),
    (Duration::days(91), "91 days"),
    (Duration::days(365), "365 days"),
];

/// The most points the chart draws for a span of sales.
pub const MAX_CHART_POINTS: i64 = 60;

impl Bucket {
    /// The narrowest bucket that keeps the chart to at most
    /// [`MAX_CHART_POINTS`] points for sales spread over `span`. Buckets are
    /// aligned to a fixed origin, so `span / width` whole buckets can touch
    /// two more partial ones: the width must cover `span / (MAX - 2)`.
    pub fn for_span(span: Duration) -> Self {
        let span = span.max(Duration::ZERO);
        let fits = |width: Duration| {
            width.whole_seconds() * (MAX_CHART_POINTS - 2) >= span.whole_seconds()
        };
        let (width, label) = BUCKETS
            .iter()
            .copied()
            .find(|(width, _)| fits(*width))
            .unwrap_or(BUCKETS[BUCKETS.len() - 1]);
        Self { width, label }
    }
}

/// One point of the chart: the bucket's start, the tickets sold in it and
/// all tickets sold up to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SalesPoint {
    pub at: OffsetDateTime,
    pub sold: i64,
    pub cumulative: i64,
}

/// Confirmed tickets over time, one point per bucket from the first sale's
/// bucket to the last's (quiet buckets included, so the line is honest).
#[derive(Debug, Clone)]
pub struct SalesChart {
    pub bucket: Bucket,
    pub points: Vec<SalesPoint>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_keep_the_chart_to_sixty_points() {
        assert_eq!(Bucket::for_span(Duration::ZERO).label, "minute");
        assert_eq!(Bucket::for_span(Duration::minutes(58)).label, "minute");
        assert_eq!(Bucket::for_span(Duration::minutes(59)).label, "5 minutes");
        assert_eq!(Bucket::for_span(Duration::hours(3)).label, "5 minutes");
        assert_eq!(Bucket::for_span(Duration::hours(20)).label, "hour");
        assert_eq!(Bucket::for_span(Duration::days(3)).label, "3 hours");
        assert_eq!(Bucket::for_span(Duration::days(40)).label, "day");
        assert_eq!(Bucket::for_span(Duration::days(200)).label, "week");
        assert_eq!(Bucket::for_span(Duration::days(100_000)).label, "365 days");
        // Whatever the span, at most 60 aligned buckets cover it (until the
        // widest bucket runs out, after 58 years of sales).
        for minutes in (0..60 * 24 * 365 * 50).step_by(7919) {
            let span = Duration::minutes(minutes);
            let width = Bucket::for_span(span).width;
            let worst = span.whole_seconds() / width.whole_seconds() + 2;
            assert!(worst <= MAX_CHART_POINTS, "{span}: {worst} points");
        }
    }
}
