//! The organizer's per-event dashboard: sales per ticket type, the orders
//! (searchable, paginated, exported as CSV) and tickets sold over time.
//!
//! Every query joins `events` on the organizer as well as the event, so it
//! returns nothing for someone else's event even if a caller forgot to check
//! ownership first.

use sqlx::{PgPool, postgres::types::PgInterval};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

use crate::error::AppError;

/// Orders shown per page of the dashboard's order list.
pub const ORDERS_PER_PAGE: i64 = 50;

/// Longest search text used; anything longer is cut.
pub const MAX_QUERY_CHARS: usize = 200;

/// Money in one currency, in minor units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revenue {
    pub currency: String,
    pub minor: i64,
}

/// One ticket type's sales. `sold` and `revenue` count confirmed orders;
/// revenue uses each order's own price and currency (later price edits do
/// not rewrite it), one entry per currency.
#[derive(Debug, Clone)]
pub struct TicketTypeSales {
    pub id: Uuid,
    pub name: String,
    pub capacity: i32,
    pub remaining: i32,
    pub sold: i64,
    pub revenue: Vec<Revenue>,
}

/// The totals row.
#[derive(Debug, Clone, Default)]
pub struct SalesTotals {
    pub capacity: i64,
    pub remaining: i64,
    pub sold: i64,
    pub revenue: Vec<Revenue>,
}

/// One line of the order list.
#[derive(Debug, Clone)]
pub struct OrderRow {
    pub id: Uuid,
    pub created_at: OffsetDateTime,
    pub email: String,
    pub ticket_type: String,
    pub quantity: i32,
    pub status: String,
    pub unit_price_minor: i64,
    pub currency: String,
}

impl OrderRow {
    pub fn total_minor(&self) -> i64 {
        self.unit_price_minor * i64::from(self.quantity)
    }
}

/// One page of orders matching a search.
#[derive(Debug, Clone)]
pub struct OrdersPage {
    /// The search as used (trimmed and cut), empty for all orders.
    pub query: String,
    /// 1-based, within `1..=pages`.
    pub page: i64,
    pub pages: i64,
    /// Orders matching the search, on all pages.
    pub matching: i64,
    pub rows: Vec<OrderRow>,
}

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

    fn interval(self) -> PgInterval {
        PgInterval {
            months: 0,
            days: 0,
            microseconds: self.width.whole_microseconds() as i64,
        }
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

/// Everything on the dashboard but the event itself, read in one snapshot so
/// that the numbers agree with each other during a live sale.
#[derive(Debug, Clone)]
pub struct Dashboard {
    pub ticket_types: Vec<TicketTypeSales>,
    pub totals: SalesTotals,
    pub orders: OrdersPage,
    /// `None` until the first ticket is sold.
    pub chart: Option<SalesChart>,
}

/// Load the dashboard of an event of this organizer's. `query` filters the
/// order list by email (substring, any case); `page` is 1-based and is
/// brought into range.
pub async fn load(
    db: &PgPool,
    organizer_id: Uuid,
    event_id: Uuid,
    query: &str,
    page: i64,
) -> Result<Dashboard, AppError> {
    // Read only at Repeatable Read: one snapshot for every query below, and
    // a read-only transaction there never fails to serialize.
    let mut tx = db
        .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .await?;

    let ticket_types = ticket_type_sales(&mut tx, organizer_id, event_id).await?;
    let totals = totals(&ticket_types);
    let orders = orders_page(&mut tx, organizer_id, event_id, query, page).await?;
    let chart = sales_chart(&mut tx, organizer_id, event_id).await?;
    tx.commit().await?;
    Ok(Dashboard {
        ticket_types,
        totals,
        orders,
        chart,
    })
}

async fn ticket_type_sales(
    tx: &mut sqlx::PgConnection,
    organizer_id: Uuid,
    event_id: Uuid,
) -> Result<Vec<TicketTypeSales>, AppError> {
    // One row per ticket type and order currency (a ticket type without
    // confirmed orders has one row with no currency).
    let rows = sqlx::query!(
        r#"SELECT t.id, t.name, t.capacity, t.remaining,
                  o.currency AS "currency?",
                  COALESCE(SUM(o.quantity), 0)::int8 AS "sold!",
                  COALESCE(SUM(o.quantity::int8 * o.unit_price_minor), 0)::int8 AS "revenue_minor!"
           FROM ticket_types t
           JOIN events e ON e.id = t.event_id
           LEFT JOIN orders o ON o.ticket_type_id = t.id AND o.status = 'confirmed'
           WHERE t.event_id = $1 AND e.organizer_id = $2
           GROUP BY t.id, o.currency
           ORDER BY t.position, t.created_at, t.id, o.currency"#,
        event_id,
        organizer_id,
    )
    .fetch_all(&mut *tx)
    .await?;
    let mut sales: Vec<TicketTypeSales> = Vec::new();
    for row in rows {
        let entry = match sales.last_mut() {
            Some(last) if last.id == row.id => last,
            _ => {
                sales.push(TicketTypeSales {
                    id: row.id,
                    name: row.name,
                    capacity: row.capacity,
                    remaining: row.remaining,
                    sold: 0,
                    revenue: Vec::new(),
                });
                let last = sales.len() - 1;
                &mut sales[last]
            }
        };
        entry.sold += row.sold;
        if let Some(currency) = row.currency {
            entry.revenue.push(Revenue {
                currency,
                minor: row.revenue_minor,
            });
        }
    }
    Ok(sales)
}

/// Sum the ticket types; revenue stays per currency, sorted by code.
pub fn totals(ticket_types: &[TicketTypeSales]) -> SalesTotals {
    let mut totals = SalesTotals::default();
    for tt in ticket_types {
        totals.capacity += i64::from(tt.capacity);
        totals.remaining += i64::from(tt.remaining);
        totals.sold += tt.sold;
        for revenue in &tt.revenue {
            match totals
                .revenue
                .iter_mut()
                .find(|r| r.currency == revenue.currency)
            {
                Some(sum) => sum.minor += revenue.minor,
                None => totals.revenue.push(revenue.clone()),
            }
        }
    }
    totals.revenue.sort_by(|a, b| a.currency.cmp(&b.currency));
    totals
}

/// The search as it is used: trimmed and at most [`MAX_QUERY_CHARS`].
pub fn normalise_query(raw: &str) -> String {
    raw.trim().chars().take(MAX_QUERY_CHARS).collect()
}

/// An `ILIKE` pattern matching `query` anywhere, with `\`, `%` and `_`
/// escaped so that they match themselves; `None` for an empty search.
pub fn contains_pattern(query: &str) -> Option<String> {
    if query.is_empty() {
        return None;
    }
    let mut pattern = String::with_capacity(query.len() + 2);
    pattern.push('%');
    for c in query.chars() {
        if matches!(c, '\\' | '%' | '_') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    Some(pattern)
}

async fn orders_page(
    tx: &mut sqlx::PgConnection,
    organizer_id: Uuid,
    event_id: Uuid,
    query: &str,
    page: i64,
) -> Result<OrdersPage, AppError> {
    let query = normalise_query(query);
    let pattern = contains_pattern(&query);
    let matching = sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!"
           FROM orders o
           JOIN ticket_types t ON t.id = o.ticket_type_id
           JOIN events e ON e.id = t.event_id
           WHERE t.event_id = $1 AND e.organizer_id = $2
             AND ($3::text IS NULL OR o.email ILIKE $3 ESCAPE '\')"#,
        event_id,
        organizer_id,
        pattern.as_deref(),
    )
    .fetch_one(&mut *tx)
    .await?;
    let pages = page_count(matching);
    let page = page.clamp(1, pages);
    let rows = sqlx::query_as!(
        OrderRow,
        r#"SELECT o.id, o.created_at, o.email, t.name AS ticket_type, o.quantity, o.status,
                  o.unit_price_minor, o.currency
           FROM orders o
           JOIN ticket_types t ON t.id = o.ticket_type_id
           JOIN events e ON e.id = t.event_id
           WHERE t.event_id = $1 AND e.organizer_id = $2
             AND ($3::text IS NULL OR o.email ILIKE $3 ESCAPE '\')
           ORDER BY o.created_at DESC, o.id DESC
           LIMIT $4 OFFSET $5"#,
        event_id,
        organizer_id,
        pattern.as_deref(),
        ORDERS_PER_PAGE,
        (page - 1) * ORDERS_PER_PAGE,
    )
    .fetch_all(&mut *tx)
    .await?;
    Ok(OrdersPage {
        query,
        page,
        pages,
        matching,
        rows,
    })
}

/// Pages needed for `matching` orders; an empty list is still one page.
pub fn page_count(matching: i64) -> i64 {
    ((matching + ORDERS_PER_PAGE - 1) / ORDERS_PER_PAGE).max(1)
}

/// A fixed origin for `date_bin`, a Monday at midnight UTC: minute, hour and
/// day buckets start on the clock's round numbers, weeks on Mondays.
const BUCKET_ORIGIN: OffsetDateTime = time::macros::datetime!(2001-01-01 00:00 UTC);

async fn sales_chart(
    tx: &mut sqlx::PgConnection,
    organizer_id: Uuid,
    event_id: Uuid,
) -> Result<Option<SalesChart>, AppError> {
    let span = sqlx::query!(
        r#"SELECT min(o.created_at) AS first, max(o.created_at) AS last
           FROM orders o
           JOIN ticket_types t ON t.id = o.ticket_type_id
           JOIN events e ON e.id = t.event_id
           WHERE t.event_id = $1 AND e.organizer_id = $2 AND o.status = 'confirmed'"#,
        event_id,
        organizer_id,
    )
    .fetch_one(&mut *tx)
    .await?;
    let (Some(first), Some(last)) = (span.first, span.last) else {
        return Ok(None);
    };
    let bucket = Bucket::for_span(last - first);
    // Bucket in SQL; generate_series fills the buckets without sales so that
    // every point is one bucket apart. The interval is fixed microseconds, so
    // the series steps agree with date_bin whatever the session time zone.
    let rows = sqlx::query!(
        r#"WITH sold AS (
               SELECT date_bin($3::interval, o.created_at, $4::timestamptz) AS bucket,
                      SUM(o.quantity)::int8 AS tickets
               FROM orders o
               JOIN ticket_types t ON t.id = o.ticket_type_id
               JOIN events e ON e.id = t.event_id
               WHERE t.event_id = $1 AND e.organizer_id = $2 AND o.status = 'confirmed'
               GROUP BY 1
           )
           SELECT g.bucket AS "at!",
                  COALESCE(s.tickets, 0)::int8 AS "sold!",
                  (SUM(COALESCE(s.tickets, 0)) OVER (ORDER BY g.bucket))::int8 AS "cumulative!"
           FROM (SELECT min(bucket) AS lo, max(bucket) AS hi FROM sold) AS span
           CROSS JOIN LATERAL generate_series(span.lo, span.hi, $3::interval) AS g (bucket)
           LEFT JOIN sold s ON s.bucket = g.bucket
           ORDER BY g.bucket"#,
        event_id,
        organizer_id,
        bucket.interval(),
        BUCKET_ORIGIN,
    )
    .fetch_all(&mut *tx)
    .await?;
    let points = rows
        .into_iter()
        .map(|row| SalesPoint {
            at: row.at,
            sold: row.sold,
            cumulative: row.cumulative,
        })
        .collect();
    Ok(Some(SalesChart { bucket, points }))
}

/// One line of the CSV export.
#[derive(Debug, Clone)]
pub struct ExportRow {
    pub id: Uuid,
    pub created_at: OffsetDateTime,
    pub email: String,
    pub ticket_type: String,
    pub quantity: i32,
    pub unit_price_minor: i64,
    pub currency: String,
    pub status: String,
    /// The order's ticket codes in seat order, separated by spaces.
    pub ticket_codes: String,
}

/// Every order of the event, oldest first, with its ticket codes.
pub async fn export_orders(
    db: &PgPool,
    organizer_id: Uuid,
    event_id: Uuid,
) -> Result<Vec<ExportRow>, AppError> {
    Ok(sqlx::query_as!(
        ExportRow,
        r#"SELECT o.id, o.created_at, o.email, t.name AS ticket_type, o.quantity,
                  o.unit_price_minor, o.currency, o.status,
                  COALESCE((SELECT string_agg(k.code, ' ' ORDER BY k.position)
                            FROM tickets k WHERE k.order_id = o.id), '') AS "ticket_codes!"
           FROM orders o
           JOIN ticket_types t ON t.id = o.ticket_type_id
           JOIN events e ON e.id = t.event_id
           WHERE t.event_id = $1 AND e.organizer_id = $2
           ORDER BY o.created_at, o.id"#,
        event_id,
        organizer_id,
    )
    .fetch_all(db)
    .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_patterns_escape_wildcards() {
        assert_eq!(contains_pattern(""), None);
        assert_eq!(contains_pattern("ada").as_deref(), Some("%ada%"));
        assert_eq!(
            contains_pattern(r"50%_a\b").as_deref(),
            Some(r"%50\%\_a\\b%")
        );
    }

    #[test]
    fn queries_are_trimmed_and_cut() {
        assert_eq!(normalise_query("  Ada "), "Ada");
        assert_eq!(
            normalise_query(&"é".repeat(500)).chars().count(),
            MAX_QUERY_CHARS
        );
    }

    #[test]
    fn page_counts() {
        assert_eq!(page_count(0), 1);
        assert_eq!(page_count(1), 1);
        assert_eq!(page_count(50), 1);
        assert_eq!(page_count(51), 2);
        assert_eq!(page_count(120), 3);
    }

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
