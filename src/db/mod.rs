//! Every query but the sale transaction (which is `sale/`): events, ticket
//! types, order pages, the dashboard, organizer accounts and tokens, and
//! the outbox's relay queries.

mod codec;
pub mod dashboard;
pub mod events;
pub mod order_sync;
pub mod orders;
pub mod organizers;
pub mod outbox;
pub mod presale;
pub mod waitlist;
pub mod webhooks;

/// One round trip: the database answers (readiness).
pub async fn ping(db: &sqlx::PgPool) -> Result<(), crate::error::AppError> {
    sqlx::query_scalar!("SELECT 1 AS \"one!\"")
        .fetch_one(db)
        .await?;
    Ok(())
}
