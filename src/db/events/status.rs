//! Publishing and unpublishing, under the published-events quota.

use sqlx::PgPool;

use super::guard::{check_quotas, lock_organizer};
use crate::{
    domain::{EventId, EventStatus, OrganizerId, Quotas},
    error::AppError,
};

/// Publish or unpublish; cancelling an event is the sale path's (`src/sale/cancel.rs`).
pub async fn set_status(
    db: &PgPool,
    organizer_id: OrganizerId,
    quotas: &Quotas,
    event_id: EventId,
    status: EventStatus,
) -> Result<(), AppError> {
    let mut tx = db.begin().await?;
    lock_organizer(&mut tx, organizer_id).await?;
    let updated = sqlx::query_file!(
        "sql/events/set_status.sql",
        event_id.get(),
        organizer_id.get(),
        status.as_str(),
    )
    .execute(&mut *tx)
    .await?;
    if updated.rows_affected() != 1 {
        return Err(AppError::NotFound);
    }
    let publishes = status == EventStatus::Published;
    check_quotas(&mut tx, organizer_id, event_id, quotas, publishes).await?;
    tx.commit().await?;
    Ok(())
}
