//! The organizer's per-event dashboard: sales per ticket type, the orders
//! (searchable, paginated, exported as CSV) and tickets sold over time.
//!
//! Every query joins `events` on the organizer as well as the event, so it
//! returns nothing for someone else's event even if a caller forgot to check
//! ownership first.

//!
//! The sales table and the order list are here; the chart and the sales
//! per minute in chart.rs, the CSV export in export.rs.

mod chart;
mod export;
mod money;

use sqlx::{Executor as _, PgPool, Postgres};
use time::OffsetDateTime;

pub use chart::{MinuteSales, sales_per_minute};
pub use export::{ExportCursor, ExportRow, export_page};
pub use money::PaymentTotals;

use crate::{
    domain::{
        EventId, ORDERS_PER_PAGE, OrderId, OrderStatus, OrganizerId, SalesChart, TicketTypeId,
        contains_pattern, normalise_query, page_count,
    },
    error::AppError,
};
use chart::sales_chart;

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
    pub id: TicketTypeId,
    pub name: String,
    pub capacity: i32,
    pub remaining: i32,
    pub sold: i64,
    /// Tickets of confirmed orders redeemed at a door.
    pub checked_in: i64,
    /// Tickets taken from the stock by orders still held: waiting for their
    /// buyer's confirmation (or payment), back on sale if it never comes.
    pub held: i64,
    pub revenue: Vec<Revenue>,
}

/// The totals row.
#[derive(Debug, Clone, Default)]
pub struct SalesTotals {
    pub capacity: i64,
    pub remaining: i64,
    pub sold: i64,
    pub checked_in: i64,
    pub held: i64,
    pub revenue: Vec<Revenue>,
    /// Stripe's payments of the event, per currency.
    pub payments: Vec<PaymentTotals>,
}

/// One line of the order list.
#[derive(Debug, Clone)]
pub struct OrderRow {
    pub id: OrderId,
    pub created_at: OffsetDateTime,
    pub email: String,
    pub ticket_type: String,
    pub quantity: i32,
    pub status: OrderStatus,
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
    organizer_id: OrganizerId,
    event_id: EventId,
    query: &str,
    page: i64,
) -> Result<Dashboard, AppError> {
    let mut tx = snapshot(db).await?;

    let ticket_types = ticket_type_sales(&mut tx, organizer_id, event_id).await?;
    let mut totals = SalesTotals::of(&ticket_types);
    totals.payments = money::payment_totals(&mut tx, organizer_id, event_id).await?;
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

/// A read-only transaction at Repeatable Read: one snapshot for every query
/// in it, and such a transaction never fails to serialize. Set by its first
/// statement rather than by the BEGIN, so that it also holds behind a
/// pooler in transaction mode, where the pool's connection is already in a
/// transaction when this one begins.
async fn snapshot(db: &PgPool) -> Result<sqlx::Transaction<'static, Postgres>, AppError> {
    let mut tx = db.begin().await?;
    tx.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .await?;
    Ok(tx)
}

/// The dashboard's sales table alone (per ticket type, and the totals),
/// read in one snapshot: the organizer API's stats.
pub async fn sales(
    db: &PgPool,
    organizer_id: OrganizerId,
    event_id: EventId,
) -> Result<(Vec<TicketTypeSales>, SalesTotals), AppError> {
    let mut tx = snapshot(db).await?;
    let ticket_types = ticket_type_sales(&mut tx, organizer_id, event_id).await?;
    let payments = money::payment_totals(&mut tx, organizer_id, event_id).await?;
    tx.commit().await?;
    let mut totals = SalesTotals::of(&ticket_types);
    totals.payments = payments;
    Ok((ticket_types, totals))
}

async fn ticket_type_sales(
    tx: &mut sqlx::PgConnection,
    organizer_id: OrganizerId,
    event_id: EventId,
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
        event_id.get(),
        organizer_id.get(),
    )
    .fetch_all(&mut *tx)
    .await?;
    let mut sales: Vec<TicketTypeSales> = Vec::new();
    for row in rows {
        let entry = match sales.last_mut() {
            Some(last) if last.id.get() == row.id => last,
            _ => {
                sales.push(TicketTypeSales {
                    id: row.id.into(),
                    name: row.name,
                    capacity: row.capacity,
                    remaining: row.remaining,
                    sold: 0,
                    checked_in: 0,
                    held: 0,
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
    let checked_in = sqlx::query!(
        r#"SELECT o.ticket_type_id, count(*) AS "checked_in!"
           FROM tickets k
           JOIN orders o ON o.id = k.order_id
           JOIN ticket_types t ON t.id = o.ticket_type_id
           JOIN events e ON e.id = t.event_id
           WHERE t.event_id = $1 AND e.organizer_id = $2
             AND o.status = 'confirmed' AND k.redeemed_at IS NOT NULL
           GROUP BY o.ticket_type_id"#,
        event_id.get(),
        organizer_id.get(),
    )
    .fetch_all(&mut *tx)
    .await?;
    for row in checked_in {
        if let Some(entry) = sales.iter_mut().find(|s| s.id.get() == row.ticket_type_id) {
            entry.checked_in = row.checked_in;
        }
    }
    let held = sqlx::query!(
        r#"SELECT o.ticket_type_id, sum(o.quantity)::int8 AS "held!"
           FROM orders o
           JOIN ticket_types t ON t.id = o.ticket_type_id
           JOIN events e ON e.id = t.event_id
           WHERE t.event_id = $1 AND e.organizer_id = $2 AND o.status = 'held'
           GROUP BY o.ticket_type_id"#,
        event_id.get(),
        organizer_id.get(),
    )
    .fetch_all(&mut *tx)
    .await?;
    for row in held {
        if let Some(entry) = sales.iter_mut().find(|s| s.id.get() == row.ticket_type_id) {
            entry.held = row.held;
        }
    }
    Ok(sales)
}

impl SalesTotals {
    /// Sum the ticket types; revenue stays per currency, sorted by code.
    pub fn of(ticket_types: &[TicketTypeSales]) -> Self {
        let mut totals = SalesTotals::default();
        for tt in ticket_types {
            totals.capacity += i64::from(tt.capacity);
            totals.remaining += i64::from(tt.remaining);
            totals.sold += tt.sold;
            totals.checked_in += tt.checked_in;
            totals.held += tt.held;
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
}

async fn orders_page(
    tx: &mut sqlx::PgConnection,
    organizer_id: OrganizerId,
    event_id: EventId,
    query: &str,
    page: i64,
) -> Result<OrdersPage, AppError> {
    let query = normalise_query(query);
    let pattern = contains_pattern(&query);
    // The email column compares bytewise (migrations/0007): the search folds
    // case under the database's own collation, as it did before.
    let matching = sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!"
           FROM orders o
           JOIN ticket_types t ON t.id = o.ticket_type_id
           JOIN events e ON e.id = t.event_id
           WHERE t.event_id = $1 AND e.organizer_id = $2
             AND ($3::text IS NULL OR o.email COLLATE "default" ILIKE $3 ESCAPE '\')"#,
        event_id.get(),
        organizer_id.get(),
        pattern.as_deref(),
    )
    .fetch_one(&mut *tx)
    .await?;
    let pages = page_count(matching);
    let page = page.clamp(1, pages);
    let rows = sqlx::query_as!(
        OrderRow,
        r#"SELECT o.id, o.created_at, o.email, t.name AS ticket_type, o.quantity,
                  o.status AS "status: OrderStatus",
                  o.unit_price_minor, o.currency
           FROM orders o
           JOIN ticket_types t ON t.id = o.ticket_type_id
           JOIN events e ON e.id = t.event_id
           WHERE t.event_id = $1 AND e.organizer_id = $2
             AND ($3::text IS NULL OR o.email COLLATE "default" ILIKE $3 ESCAPE '\')
           ORDER BY o.created_at DESC, o.id DESC
           LIMIT $4 OFFSET $5"#,
        event_id.get(),
        organizer_id.get(),
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
