//! The Postgres baselines: one transaction per purchase
//! ([`crate::sale::single`]), for comparison only.

use time::OffsetDateTime;

use crate::{
    error::AppError,
    sale::{
        Holding,
        outcome::Purchase,
        request::PurchaseRequest,
        single::{self, Locking},
    },
};

/// `naive`: the ticket type's row locked by the final conditional UPDATE.
pub(super) async fn naive(
    db: &sqlx::PgPool,
    holding: &Holding,
    now: OffsetDateTime,
    request: &PurchaseRequest,
) -> Result<Purchase, AppError> {
    single::purchase(db, holding, now, request, Locking::AtTheEnd).await
}

/// `for-update`: the row locked first, with `SELECT ... FOR UPDATE`, for
/// the whole transaction.
pub(super) async fn for_update(
    db: &sqlx::PgPool,
    holding: &Holding,
    now: OffsetDateTime,
    request: &PurchaseRequest,
) -> Result<Purchase, AppError> {
    single::purchase(db, holding, now, request, Locking::RowLockFirst).await
}
