//! The CSV export's rows, a page at a time.

use sqlx::PgPool;
use time::OffsetDateTime;

use crate::domain::{EventId, OrderId, OrderStatus, OrganizerId};

/// One line of the CSV export.
#[derive(Debug, Clone)]
pub struct ExportRow {
    pub id: OrderId,
    pub created_at: OffsetDateTime,
    pub email: String,
    pub ticket_type: String,
    pub quantity: i32,
    pub unit_price_minor: i64,
    pub currency: String,
    pub status: OrderStatus,
    /// The order's ticket codes in seat order, separated by spaces.
    pub ticket_codes: String,
    /// Its Stripe payment: `pending`, `paid`, `refunding`, `refunded`,
    /// `failed`; empty without one.
    pub payment: String,
    /// Stripe's PaymentIntent id, if any.
    pub payment_intent: String,
}

/// Where a page of the export starts: after this order in
/// `(created_at, id)` order.
pub type ExportCursor = (OffsetDateTime, OrderId);

/// One page of the event's orders, oldest first, after `after`, with their
/// ticket codes: a short query of its own, so that the connection goes back
/// to the pool between pages (an export whose client reads slowly holds
/// none). An order committed during the export with an earlier
/// `created_at` than the page it would fall in is not in the file.
pub async fn export_page(
    db: &PgPool,
    organizer_id: OrganizerId,
    event_id: EventId,
    after: Option<ExportCursor>,
    limit: i64,
) -> Result<Vec<ExportRow>, sqlx::Error> {
    let (after_at, after_id) = after.map(|(at, id)| (at, id.get())).unzip();
    sqlx::query_as!(
        ExportRow,
        r#"SELECT o.id, o.created_at, o.email, t.name AS ticket_type, o.quantity,
                  o.unit_price_minor, o.currency, o.status AS "status: OrderStatus",
                  COALESCE((SELECT string_agg(k.code, ' ' ORDER BY k.position)
                            FROM tickets k WHERE k.order_id = o.id), '') AS "ticket_codes!",
                  CASE WHEN p.refund = 'done' THEN 'refunded' WHEN p.refund = 'due' THEN 'refunding'
                       WHEN p.status = 'succeeded' THEN 'paid' ELSE COALESCE(p.status, '') END
                      AS "payment!",
                  COALESCE(p.intent_id, '') AS "payment_intent!"
           FROM orders o
           JOIN ticket_types t ON t.id = o.ticket_type_id
           JOIN events e ON e.id = t.event_id
           LEFT JOIN payments p ON p.order_id = o.id
           WHERE t.event_id = $1 AND e.organizer_id = $2
             AND ($3::timestamptz IS NULL OR (o.created_at, o.id) > ($3, $4::uuid))
           ORDER BY o.created_at, o.id
           LIMIT $5"#,
        event_id.get(),
        organizer_id.get(),
        after_at,
        after_id,
        limit,
    )
    .fetch_all(db)
    .await
}
