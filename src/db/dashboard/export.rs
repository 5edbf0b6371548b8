//! The CSV export's rows, streamed.

use futures_util::stream::BoxStream;
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
}

/// Every order of the event, oldest first, with its ticket codes, as a
/// stream of rows read off the connection as they are consumed (never the
/// whole result in memory).
pub fn export_orders(
    db: &PgPool,
    organizer_id: OrganizerId,
    event_id: EventId,
) -> BoxStream<'_, Result<ExportRow, sqlx::Error>> {
    sqlx::query_as!(
        ExportRow,
        r#"SELECT o.id, o.created_at, o.email, t.name AS ticket_type, o.quantity,
                  o.unit_price_minor, o.currency, o.status AS "status: OrderStatus",
                  COALESCE((SELECT string_agg(k.code, ' ' ORDER BY k.position)
                            FROM tickets k WHERE k.order_id = o.id), '') AS "ticket_codes!"
           FROM orders o
           JOIN ticket_types t ON t.id = o.ticket_type_id
           JOIN events e ON e.id = t.event_id
           WHERE t.event_id = $1 AND e.organizer_id = $2
           ORDER BY o.created_at, o.id"#,
        event_id.get(),
        organizer_id.get(),
    )
    .fetch(db)
}
