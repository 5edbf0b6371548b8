//! Every query but the sale transaction (which is `sale/`): events, ticket
//! types, order pages, the dashboard, organizer accounts and tokens.

mod codec;
pub mod dashboard;
pub mod events;
pub mod orders;
pub mod organizers;

use sqlx::PgPool;

use crate::error::AppError;

/// One round trip to Postgres, for the health check.
pub async fn ping(db: &PgPool) -> Result<(), AppError> {
    sqlx::query_scalar!("SELECT 1 AS \"one!\"")
        .fetch_one(db)
        .await?;
    Ok(())
}
