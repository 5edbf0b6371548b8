//! The outbox's queries for its consumers (the AMQP relay, src/outbox/, and
//! the webhook fan-out, src/webhooks/): read the rows after a consumer's
//! cursor, move the cursor, delete old rows every consumer has handled, and
//! the depth for `/metrics`. The rows themselves are written by the sale
//! path's statements (`sql/`) and by a trigger on ticket types
//! (migrations/0008_outbox.sql); nothing ever updates them
//! (migrations/0014_outbox_cursors.sql says why, and why the order is
//! (xid, position)).

use sqlx::{PgPool, Postgres, Transaction};
use time::OffsetDateTime;
use uuid::Uuid;

/// Who reads the outbox; each keeps its own cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consumer {
    /// The AMQP relay.
    Amqp,
    /// The webhook fan-out.
    Webhooks,
    /// The mailer (confirmation links of held orders).
    Mail,
}

impl Consumer {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Amqp => "amqp",
            Self::Webhooks => "webhooks",
            Self::Mail => "mail",
        }
    }
}

/// One message to send.
#[derive(Debug, Clone)]
pub struct OutboxRow {
    /// The writing transaction's id: with `position`, the row's place in
    /// the log.
    pub xid: i64,
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

/// Up to `limit` rows after the consumer's cursor, in log order, from
/// transactions that have ended (below the oldest running transaction id:
/// no row can appear before them any more). The cursor row stays locked by
/// `tx` until it ends; while another instance's consumer holds it, this
/// reads nothing (`SKIP LOCKED`), so consumers of one kind on one database
/// never handle a row at the same time.
pub async fn read_after_cursor(
    tx: &mut Transaction<'_, Postgres>,
    consumer: Consumer,
    limit: i64,
) -> Result<Vec<OutboxRow>, sqlx::Error> {
    sqlx::query_as!(
        OutboxRow,
        r#"SELECT o.xid::text::int8 AS "xid!", o.position AS "position!", o.id AS "id!",
                  o.kind AS "kind!", o.event_id AS "event_id!", o.order_id, o.ticket_type_id,
                  o.sequence AS "sequence!", o.payload AS "payload!",
                  o.created_at AS "created_at!"
           FROM (SELECT xid, position FROM outbox_cursors WHERE consumer = $1
                 FOR UPDATE SKIP LOCKED) c
           -- LATERAL, so that the cursor bounds one index range scan.
           CROSS JOIN LATERAL (
               SELECT * FROM outbox o
               WHERE (o.xid, o.position) > (c.xid, c.position)
                 AND o.xid < pg_snapshot_xmin(pg_current_snapshot())
               ORDER BY o.xid, o.position LIMIT $2
           ) o
           ORDER BY o.xid, o.position"#,
        consumer.as_str(),
        limit,
    )
    .fetch_all(&mut **tx)
    .await
}

/// A row's place in the log: (writing transaction's id, position).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogPosition {
    pub xid: i64,
    pub position: i64,
}

impl From<&OutboxRow> for LogPosition {
    fn from(row: &OutboxRow) -> Self {
        Self {
            xid: row.xid,
            position: row.position,
        }
    }
}

/// The rows [`read_after_cursor`] would read, by their places only: how
/// many, the first and the last. For a consumer that hands the rows on
/// inside Postgres (the webhook fan-out), so that their payloads are not
/// sent to the app and parsed for nothing. `None` when there are none (or
/// another instance holds the cursor).
#[derive(Debug, Clone, Copy)]
pub struct Span {
    pub rows: i64,
    pub first: LogPosition,
    pub last: LogPosition,
}

/// See [`Span`]; locks the cursor as [`read_after_cursor`] does.
pub async fn span_after_cursor(
    tx: &mut Transaction<'_, Postgres>,
    consumer: Consumer,
    limit: i64,
) -> Result<Option<Span>, sqlx::Error> {
    let span = sqlx::query!(
        r#"WITH r AS (
               SELECT o.xid, o.position
               FROM (SELECT xid, position FROM outbox_cursors WHERE consumer = $1
                     FOR UPDATE SKIP LOCKED) c
               CROSS JOIN LATERAL (
                   SELECT o.xid, o.position FROM outbox o
                   WHERE (o.xid, o.position) > (c.xid, c.position)
                     AND o.xid < pg_snapshot_xmin(pg_current_snapshot())
                   ORDER BY o.xid, o.position LIMIT $2
               ) o
           )
           SELECT n.rows AS "rows!", f.xid::text::int8 AS "first_xid!", f.position AS "first_position!",
                  l.xid::text::int8 AS "last_xid!", l.position AS "last_position!"
           FROM (SELECT count(*) AS rows FROM r) n
           CROSS JOIN LATERAL (SELECT xid, position FROM r ORDER BY xid, position LIMIT 1) f
           CROSS JOIN LATERAL (SELECT xid, position FROM r
                               ORDER BY xid DESC, position DESC LIMIT 1) l"#,
        consumer.as_str(),
        limit,
    )
    .fetch_optional(&mut **tx)
    .await?;
    Ok(span.map(|s| Span {
        rows: s.rows,
        first: LogPosition {
            xid: s.first_xid,
            position: s.first_position,
        },
        last: LogPosition {
            xid: s.last_xid,
            position: s.last_position,
        },
    }))
}

/// Move the consumer's cursor past `last` (a row read by
/// [`read_after_cursor`] or the end of a [`Span`] in `tx`); returns the
/// database's clock, for the rows' lag.
pub async fn move_cursor(
    tx: &mut Transaction<'_, Postgres>,
    consumer: Consumer,
    last: impl Into<LogPosition>,
) -> Result<OffsetDateTime, sqlx::Error> {
    let last = last.into();
    sqlx::query_scalar!(
        r#"UPDATE outbox_cursors SET xid = $2::text::xid8, position = $3, moved_at = clock_timestamp()
           WHERE consumer = $1
           RETURNING moved_at"#,
        consumer.as_str(),
        last.xid.to_string(),
        last.position,
    )
    .fetch_one(&mut **tx)
    .await
}

/// Delete up to `limit` rows written before `before` that every consumer
/// has handled (webhook deliveries keep their own copy); returns how many
/// went. Rows another instance is deleting are skipped.
pub async fn delete_handled(
    db: &PgPool,
    before: OffsetDateTime,
    limit: i64,
) -> Result<u64, sqlx::Error> {
    let mut tx = db.begin().await?;
    let deleted = sqlx::query!(
        "DELETE FROM outbox WHERE (xid, position) IN (
             SELECT o.xid, o.position FROM outbox o
             WHERE o.created_at < $1
               AND NOT EXISTS (SELECT 1 FROM outbox_cursors c
                               WHERE (o.xid, o.position) > (c.xid, c.position))
             ORDER BY o.xid, o.position LIMIT $2 FOR UPDATE SKIP LOCKED)",
        before,
        limit,
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    tx.commit().await?;
    Ok(deleted)
}

/// Rows not yet sent, and the age in seconds of the oldest (0 when none).
pub async fn depth(db: &PgPool) -> Result<(i64, f64), sqlx::Error> {
    let row = sqlx::query!(
        r#"SELECT count(*) AS "depth!",
                  coalesce(extract(epoch FROM now() - min(created_at))::float8, 0) AS "oldest!"
           FROM outbox_behind('amqp')"#
    )
    .fetch_one(db)
    .await?;
    Ok((row.depth, row.oldest))
}
