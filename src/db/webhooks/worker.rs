//! The worker's side (`webhooks/`): fan-out of the outbox, claiming due
//! deliveries, recording attempts.

use sqlx::{PgPool, Postgres, Transaction};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::db::outbox::{self, Consumer};

/// Fan up to `limit` outbox rows out to the matching enabled endpoints of
/// their event's organizer: one delivery per endpoint per message (the
/// unique constraint makes a repeat a no-op), and move the fan-out's
/// cursor past them. While another instance's worker holds the cursor,
/// this does nothing. Returns (rows, deliveries).
pub async fn fan_out(db: &PgPool, limit: i64) -> Result<(usize, u64), sqlx::Error> {
    let mut tx: Transaction<'_, Postgres> = db.begin().await?;
    // The rows' places only: the statement below reads the rows themselves.
    let Some(span) = outbox::span_after_cursor(&mut tx, Consumer::Webhooks, limit).await? else {
        tx.commit().await?;
        return Ok((0, 0));
    };
    let (first, last) = (span.first, span.last);
    // The body: the AMQP message's (docs/organizer-api.md), whose `type`, `timestamp` and
    // `data` are also Standard Webhooks' suggested shape.
    let inserted = sqlx::query!(
        "INSERT INTO webhook_deliveries (endpoint_id, message_id, kind, body, next_attempt_at)
         SELECT w.id, o.id, o.kind,
                jsonb_build_object(
                    'id', o.id, 'type', o.kind, 'event_id', o.event_id,
                    'order_id', o.order_id, 'ticket_type_id', o.ticket_type_id,
                    'sequence', o.sequence, 'occurred_at', t.at, 'timestamp', t.at,
                    'data', o.payload),
                now()
         FROM outbox o
         CROSS JOIN LATERAL (SELECT to_char(o.created_at AT TIME ZONE 'UTC',
                                            'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') AS at) t
         JOIN events e ON e.id = o.event_id
         JOIN webhook_endpoints w
           ON w.organizer_id = e.organizer_id AND w.enabled AND o.kind = ANY(w.event_types)
         -- The rows read: every row from the first to the last, in log order.
         WHERE (o.xid, o.position) BETWEEN ($1::text::xid8, $2) AND ($3::text::xid8, $4)
         ON CONFLICT ON CONSTRAINT webhook_deliveries_once DO NOTHING",
        first.xid.to_string(),
        first.position,
        last.xid.to_string(),
        last.position,
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    outbox::move_cursor(&mut tx, Consumer::Webhooks, last).await?;
    tx.commit().await?;
    Ok((usize::try_from(span.rows).unwrap_or_default(), inserted))
}

/// A delivery the worker is to attempt now.
#[derive(Debug, Clone)]
pub struct Due {
    pub id: Uuid,
    pub endpoint_id: Uuid,
    pub message_id: Uuid,
    pub body: serde_json::Value,
    pub attempts: i32,
    pub first_attempt_at: Option<OffsetDateTime>,
    pub url: String,
    pub secret: String,
}

/// Claim up to `limit` due deliveries of enabled endpoints: each is leased
/// for `lease_ms` (pushed out of the due set), so other workers skip it and
/// a worker that dies mid-attempt leaves it due again when the lease ends.
pub async fn claim_due(db: &PgPool, limit: i64, lease_ms: i64) -> Result<Vec<Due>, sqlx::Error> {
    let mut tx = db.begin().await?;
    let due = sqlx::query_as!(
        Due,
        r#"WITH due AS (
               SELECT d.id FROM webhook_deliveries d
               JOIN webhook_endpoints w ON w.id = d.endpoint_id
               WHERE d.status = 'pending' AND d.next_attempt_at <= now() AND w.enabled
               ORDER BY d.next_attempt_at LIMIT $1
               FOR UPDATE OF d SKIP LOCKED
           )
           UPDATE webhook_deliveries d
           SET next_attempt_at = now() + make_interval(secs => $2::bigint / 1000.0),
               first_attempt_at = coalesce(d.first_attempt_at, now())
           FROM due, webhook_endpoints w
           WHERE d.id = due.id AND w.id = d.endpoint_id
           RETURNING d.id, d.endpoint_id, d.message_id, d.body, d.attempts,
                     d.first_attempt_at, w.url, w.secret"#,
        limit,
        lease_ms,
    )
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(due)
}

/// What one attempt found.
#[derive(Debug, Clone)]
pub struct AttemptRecord {
    pub attempted_at: OffsetDateTime,
    pub status_code: Option<i32>,
    pub error: Option<String>,
    pub latency_ms: i32,
    pub response_excerpt: String,
}

/// What follows an attempt.
#[derive(Debug, Clone)]
pub enum Next {
    Succeeded,
    /// Try again in this many milliseconds.
    Retry(i64),
    /// Given up; if `disable` is set, the endpoint too, for this reason.
    Failed {
        disable: Option<String>,
    },
}

/// Store an attempt and its consequence, in one transaction.
pub async fn record_attempt(
    db: &PgPool,
    due: &Due,
    attempt: &AttemptRecord,
    next: &Next,
) -> Result<(), sqlx::Error> {
    let mut tx = db.begin().await?;
    let retry_in_ms = match next {
        Next::Retry(ms) => Some(*ms),
        _ => None,
    };
    sqlx::query!(
        "INSERT INTO webhook_attempts
             (delivery_id, attempted_at, status_code, error, latency_ms, response_excerpt,
              retry_in_ms)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        due.id,
        attempt.attempted_at,
        attempt.status_code,
        attempt.error,
        attempt.latency_ms,
        attempt.response_excerpt,
        retry_in_ms,
    )
    .execute(&mut *tx)
    .await?;
    let (status, next_at_ms) = match next {
        Next::Succeeded => ("succeeded", None),
        Next::Retry(ms) => ("pending", Some(*ms)),
        Next::Failed { .. } => ("failed", None),
    };
    sqlx::query!(
        "UPDATE webhook_deliveries
         SET attempts = attempts + 1, status = $2,
             next_attempt_at = CASE WHEN $3::bigint IS NULL THEN NULL
                                    ELSE now() + make_interval(secs => $3::bigint / 1000.0) END,
             completed_at = CASE WHEN $2 = 'pending' THEN NULL ELSE now() END
         WHERE id = $1",
        due.id,
        status,
        next_at_ms,
    )
    .execute(&mut *tx)
    .await?;
    match next {
        Next::Succeeded => {
            sqlx::query!(
                "UPDATE webhook_endpoints SET last_success_at = now() WHERE id = $1",
                due.endpoint_id,
            )
            .execute(&mut *tx)
            .await?;
        }
        Next::Failed {
            disable: Some(reason),
        } => {
            sqlx::query!(
                "UPDATE webhook_endpoints
                 SET enabled = false, disabled_reason = $2, disabled_at = now()
                 WHERE id = $1 AND enabled",
                due.endpoint_id,
                reason,
            )
            .execute(&mut *tx)
            .await?;
        }
        _ => {}
    }
    tx.commit().await
}

/// Whether the endpoint has had a success since `since`.
pub async fn succeeded_since(
    db: &PgPool,
    endpoint_id: Uuid,
    since: OffsetDateTime,
) -> Result<bool, sqlx::Error> {
    Ok(sqlx::query_scalar!(
        r#"SELECT coalesce(last_success_at >= $2, false) AS "ok!" FROM webhook_endpoints
           WHERE id = $1"#,
        endpoint_id,
        since,
    )
    .fetch_optional(db)
    .await?
    .unwrap_or(false))
}

/// For `/metrics`: deliveries waiting (pending on enabled endpoints) and
/// outbox rows not yet fanned out.
pub async fn depth(db: &PgPool) -> Result<(i64, i64), sqlx::Error> {
    let row = sqlx::query!(
        r#"SELECT
             (SELECT count(*) FROM webhook_deliveries d JOIN webhook_endpoints w
                ON w.id = d.endpoint_id
              WHERE d.status = 'pending' AND w.enabled) AS "queued!",
             (SELECT count(*) FROM outbox_behind('webhooks')) AS "unfanned!""#
    )
    .fetch_one(db)
    .await?;
    Ok((row.queued, row.unfanned))
}
