//! The outbox's queries for its relay (src/outbox/): claim unsent rows,
//! mark them sent, delete old sent ones, and the depth for `/metrics`. The
//! rows themselves are written by the sale path's statements (`sql/`) and
//! by a trigger on ticket types (migrations/0008_outbox.sql).

use sqlx::{PgPool, Postgres, Transaction};
use time::OffsetDateTime;
use uuid::Uuid;

/// One message to send.
#[derive(Debug, Clone)]
pub struct OutboxRow {
    pub position: i64,
    pub id: Uuid,
    pub kind: String,
    pub event_id: Uuid,
    pub order_id: Option<Uuid>,
    pub ticket_type_id: Option<Uuid>,
    pub sequence: i64,
    pub payload: serde_json::Value,
    pub created_at: OffsetDateTime,
}

/// Up to `limit` unsent rows, oldest first, locked by `tx` until it ends.
/// Rows another relay holds are skipped (`SKIP LOCKED`), so relays on one
/// database never send a row at the same time.
pub async fn claim(
    tx: &mut Transaction<'_, Postgres>,
    limit: i64,
) -> Result<Vec<OutboxRow>, sqlx::Error> {
    sqlx::query_as!(
        OutboxRow,
        "SELECT position, id, kind, event_id, order_id, ticket_type_id, sequence, payload,
                created_at
         FROM outbox WHERE published_at IS NULL
         ORDER BY position LIMIT $1
         FOR UPDATE SKIP LOCKED",
        limit,
    )
    .fetch_all(&mut **tx)
    .await
}

/// Mark claimed rows sent (the broker confirmed them); returns each row's
/// lag, from its write to now, in seconds (one clock: the database's).
pub async fn mark_published(
    tx: &mut Transaction<'_, Postgres>,
    positions: &[i64],
) -> Result<Vec<f64>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"UPDATE outbox SET published_at = clock_timestamp()
           WHERE position = ANY($1) AND published_at IS NULL
           RETURNING extract(epoch FROM published_at - created_at)::float8 AS "lag!""#,
        positions,
    )
    .fetch_all(&mut **tx)
    .await
}

/// Delete up to `limit` rows sent before `before` (and fanned out to
/// webhooks: deliveries keep their own copy); returns how many went.
/// Rows another instance is deleting are skipped.
pub async fn delete_published(
    db: &PgPool,
    before: OffsetDateTime,
    limit: i64,
) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query!(
        "DELETE FROM outbox WHERE position IN (
             SELECT position FROM outbox
             WHERE published_at < $1 AND webhooks_fanned_at IS NOT NULL
             ORDER BY position LIMIT $2 FOR UPDATE SKIP LOCKED)",
        before,
        limit,
    )
    .execute(db)
    .await?
    .rows_affected())
}

/// Rows not yet sent, and the age in seconds of the oldest (0 when none).
pub async fn depth(db: &PgPool) -> Result<(i64, f64), sqlx::Error> {
    let row = sqlx::query!(
        r#"SELECT count(*) AS "depth!",
                  coalesce(extract(epoch FROM now() - min(created_at))::float8, 0) AS "oldest!"
           FROM outbox WHERE published_at IS NULL"#
    )
    .fetch_one(db)
    .await?;
    Ok((row.depth, row.oldest))
}
