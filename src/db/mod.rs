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
pub mod pause;
pub mod presale;
pub mod session;
pub mod waitlist;
pub mod webhooks;

/// Whether to run a transaction again after `err`: Postgres aborted it as
/// a deadlock's victim, and it has been run again fewer than
/// [`DEADLOCK_RETRIES`] times (`retries` counts them). For the transactions
/// that give tickets back: their offers to a waiting list take the next
/// buyers' holdings rows after freeing the leaving buyer's, an order no key
/// can fix in advance, so two of them (or one and a sale) can meet
/// crosswise. Use it in a loop around the whole transaction.
pub fn retry_deadlock(err: &crate::error::AppError, retries: &mut u32) -> bool {
    if !err.is_deadlock() || *retries >= DEADLOCK_RETRIES {
        return false;
    }
    *retries += 1;
    metrics::counter!("stampede_deadlock_retries_total").increment(1);
    tracing::info!(
        retries = *retries,
        "deadlock victim; running the transaction again"
    );
    true
}

/// How often [`retry_deadlock`] lets a transaction run again.
pub const DEADLOCK_RETRIES: u32 = 3;

/// One round trip: the database answers (readiness).
pub async fn ping(db: &sqlx::PgPool) -> Result<(), crate::error::AppError> {
    sqlx::query_scalar!("SELECT 1 AS \"one!\"")
        .fetch_one(db)
        .await?;
    Ok(())
}

/// A duration as Postgres sees it: fixed microseconds (no days or months,
/// which would follow the session's time zone and calendar).
pub fn pg_interval(length: std::time::Duration) -> sqlx::postgres::types::PgInterval {
    sqlx::postgres::types::PgInterval {
        months: 0,
        days: 0,
        microseconds: i64::try_from(length.as_micros()).unwrap_or(i64::MAX),
    }
}
