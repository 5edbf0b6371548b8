//! Pausing the sale of one ticket type: `sales_halted`, which the sale's
//! stock UPDATE checks in the transaction that would take the stock.

use sqlx::PgPool;

use crate::{
    domain::{EventId, OrganizerId, TicketTypeId},
    error::AppError,
};

/// Set or clear the pause of `organizer`'s ticket type. False when there is
/// no such ticket type of theirs, or its event is cancelled (whose ticket
/// types stay halted).
pub async fn set(
    db: &PgPool,
    organizer_id: OrganizerId,
    event_id: EventId,
    ticket_type_id: TicketTypeId,
    halted: bool,
) -> Result<bool, AppError> {
    let mut tx = db.begin().await?;
    let changed = sqlx::query_file_scalar!(
        "sql/events/pause_ticket_type.sql",
        ticket_type_id.get(),
        event_id.get(),
        organizer_id.get(),
        halted,
    )
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(changed.is_some())
}
