//! The organizer's side: endpoints' CRUD and their deliveries, each scoped
//! to its owner (another organizer's endpoint is "not found").

use sqlx::PgPool;
use uuid::Uuid;

use super::{Attempt, Delivery, Endpoint, EndpointChange, NewEndpoint};
use crate::{
    domain::{DeliveryId, InvalidField, MAX_WEBHOOK_ENDPOINTS, OrganizerId, WebhookId},
    error::AppError,
};

pub async fn create(
    db: &PgPool,
    organizer_id: OrganizerId,
    new: &NewEndpoint,
    secret: &str,
) -> Result<Endpoint, AppError> {
    // The organizer's row lock first, so that creations at once count each
    // other (a count in the INSERT's own snapshot would let them all pass).
    let mut tx = db.begin().await?;
    crate::db::events::guard::lock_organizer(&mut tx, organizer_id).await?;
    let created = sqlx::query_as!(
        Endpoint,
        r#"INSERT INTO webhook_endpoints (organizer_id, url, description, event_types, secret)
           SELECT $1, $2, $3, $4, $5
           WHERE (SELECT count(*) FROM webhook_endpoints WHERE organizer_id = $1) < $6
           RETURNING id, seq, url, description, event_types, enabled, disabled_reason,
                     disabled_at, last_success_at, created_at"#,
        organizer_id.get(),
        new.url,
        new.description,
        &new.event_types,
        secret,
        MAX_WEBHOOK_ENDPOINTS,
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or_else(|| {
        AppError::Invalid(InvalidField::new(
            "url",
            format!(
                "You have {MAX_WEBHOOK_ENDPOINTS} webhook endpoints, the most allowed; delete one first."
            ),
        ))
    })?;
    tx.commit().await?;
    Ok(created)
}

/// A page of the organizer's endpoints in creation order, after `after`
/// (a `seq`); one more than `limit` is read to know whether more follow.
pub async fn list(
    db: &PgPool,
    organizer_id: OrganizerId,
    after: Option<i64>,
    limit: i64,
) -> Result<Vec<Endpoint>, AppError> {
    Ok(sqlx::query_as!(
        Endpoint,
        r#"SELECT id, seq, url, description, event_types, enabled, disabled_reason,
                  disabled_at, last_success_at, created_at
           FROM webhook_endpoints
           WHERE organizer_id = $1 AND seq > coalesce($2::bigint, 0)
           ORDER BY seq LIMIT $3"#,
        organizer_id.get(),
        after,
        limit,
    )
    .fetch_all(db)
    .await?)
}

pub async fn find_owned(
    db: &PgPool,
    organizer_id: OrganizerId,
    id: WebhookId,
) -> Result<Endpoint, AppError> {
    sqlx::query_as!(
        Endpoint,
        r#"SELECT id, seq, url, description, event_types, enabled, disabled_reason,
                  disabled_at, last_success_at, created_at
           FROM webhook_endpoints WHERE id = $1 AND organizer_id = $2"#,
        id.get(),
        organizer_id.get(),
    )
    .fetch_optional(db)
    .await?
    .ok_or(AppError::NotFound)
}

/// Apply `change`; enabling clears the reason it was disabled for.
pub async fn update(
    db: &PgPool,
    organizer_id: OrganizerId,
    id: WebhookId,
    change: &EndpointChange,
) -> Result<Endpoint, AppError> {
    let mut tx = db.begin().await?;
    let endpoint = sqlx::query_as!(
        Endpoint,
        r#"UPDATE webhook_endpoints SET
               url = coalesce($3, url),
               description = coalesce($4, description),
               event_types = coalesce($5, event_types),
               enabled = coalesce($6, enabled),
               disabled_reason = CASE WHEN $6 IS NULL OR $6 = enabled THEN disabled_reason
                                      WHEN $6 THEN NULL
                                      ELSE 'Disabled by the organizer.' END,
               disabled_at = CASE WHEN $6 IS NULL OR $6 = enabled THEN disabled_at
                                  WHEN $6 THEN NULL
                                  ELSE now() END
           WHERE id = $1 AND organizer_id = $2
           RETURNING id, seq, url, description, event_types, enabled, disabled_reason,
                     disabled_at, last_success_at, created_at"#,
        id.get(),
        organizer_id.get(),
        change.url,
        change.description,
        change.event_types.as_deref(),
        change.enabled,
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(AppError::NotFound)?;
    tx.commit().await?;
    Ok(endpoint)
}

pub async fn rotate_secret(
    db: &PgPool,
    organizer_id: OrganizerId,
    id: WebhookId,
    secret: &str,
) -> Result<(), AppError> {
    let mut tx = db.begin().await?;
    let done = sqlx::query!(
        "UPDATE webhook_endpoints SET secret = $3 WHERE id = $1 AND organizer_id = $2",
        id.get(),
        organizer_id.get(),
        secret,
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    if done.rows_affected() == 0 {
        return Err(AppError::NotFound);
    }
    Ok(())
}

/// Delete an endpoint with its deliveries and their log.
pub async fn delete(db: &PgPool, organizer_id: OrganizerId, id: WebhookId) -> Result<(), AppError> {
    let mut tx = db.begin().await?;
    let done = sqlx::query!(
        "DELETE FROM webhook_endpoints WHERE id = $1 AND organizer_id = $2",
        id.get(),
        organizer_id.get(),
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    if done.rows_affected() == 0 {
        return Err(AppError::NotFound);
    }
    Ok(())
}

/// A page of an endpoint's deliveries, newest first, before `before` (a
/// `seq`), each with its attempts; one more than `limit` is read.
pub async fn deliveries(
    db: &PgPool,
    endpoint_id: WebhookId,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<Delivery>, AppError> {
    let rows = sqlx::query!(
        r#"SELECT id, seq, message_id, kind, status, attempts, next_attempt_at, created_at,
                  completed_at
           FROM webhook_deliveries
           WHERE endpoint_id = $1 AND ($2::bigint IS NULL OR seq < $2)
           ORDER BY seq DESC LIMIT $3"#,
        endpoint_id.get(),
        before,
        limit,
    )
    .fetch_all(db)
    .await?;
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let mut attempts = sqlx::query_as!(
        Attempt,
        "SELECT delivery_id, attempted_at, status_code, error, latency_ms, response_excerpt,
                retry_in_ms
         FROM webhook_attempts WHERE delivery_id = ANY($1) ORDER BY id",
        &ids,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let (log, rest) = attempts.drain(..).partition(|a| a.delivery_id == r.id);
            attempts = rest;
            Delivery {
                id: r.id.into(),
                seq: r.seq,
                message_id: r.message_id,
                kind: r.kind,
                status: r.status,
                attempts: r.attempts,
                next_attempt_at: r.next_attempt_at,
                created_at: r.created_at,
                completed_at: r.completed_at,
                log,
            }
        })
        .collect())
}

/// Send a delivery again now, with the same message id (returned); its
/// retry window starts again.
pub async fn redeliver(
    db: &PgPool,
    organizer_id: OrganizerId,
    endpoint_id: WebhookId,
    delivery_id: DeliveryId,
) -> Result<Uuid, AppError> {
    let mut tx = db.begin().await?;
    let message_id = sqlx::query_scalar!(
        "UPDATE webhook_deliveries d
         SET status = 'pending', next_attempt_at = now(), first_attempt_at = NULL,
             completed_at = NULL
         FROM webhook_endpoints w
         WHERE d.id = $1 AND d.endpoint_id = $2 AND w.id = d.endpoint_id AND w.organizer_id = $3
         RETURNING d.message_id",
        delivery_id.get(),
        endpoint_id.get(),
        organizer_id.get(),
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(AppError::NotFound)?;
    tx.commit().await?;
    Ok(message_id)
}
