//! Webhooks: an in-process worker that turns outbox rows
//! (migrations/0008_outbox.sql) into signed HTTP POSTs to organizers'
//! endpoints (migrations/0012_webhooks.sql). In rounds, it:
//! 1. fans out new outbox rows: one delivery per matching enabled endpoint
//!    of the event's organizer, with its own marker on the outbox (apart
//!    from the AMQP relay's), so webhooks work with the relay off;
//! 2. claims due deliveries with a lease (`FOR UPDATE SKIP LOCKED`, so any
//!    number of instances share the work) and POSTs them concurrently,
//!    signed per Standard Webhooks ([`signature`]) through an SSRF-safe
//!    client ([`client`]);
//! 3. records each attempt and what follows: success; a retry after the
//!    schedule's delay (`domain::RetrySchedule`); or failure, when 3 days
//!    have passed since the first attempt, or at once on `410 Gone`. A 410,
//!    or a delivery given up on while the endpoint had no success since that
//!    delivery's first attempt, disables the endpoint with a reason.
//!
//! Delivery is at least once: a worker that dies mid-attempt leaves the
//! delivery due again when its lease ends; receivers drop duplicates by
//! `webhook-id`.

pub mod client;
pub mod endpoints;
pub mod signature;

use std::time::Duration;

use futures_util::future::join_all;
use rand::Rng;
use sqlx::PgPool;
use time::OffsetDateTime;
use tokio::task::JoinHandle;

use crate::{
    db::webhooks::{self as store, AttemptRecord, Due, Next},
    domain::{RetrySchedule, format_time},
};
use client::WebhookClient;

/// How the worker runs (`stampede serve --webhook-...`).
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    /// Deliver to loopback and private addresses too (tests, private
    /// networks); off by default.
    pub allow_private: bool,
    pub schedule: RetrySchedule,
    /// How often an idle worker looks for work.
    pub poll: Duration,
    /// Outbox rows fanned out per round at most.
    pub fan_out_batch: i64,
    /// Deliveries attempted at once per worker.
    pub concurrency: i64,
    pub connect_timeout: Duration,
    pub timeout: Duration,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        Self {
            allow_private: false,
            schedule: RetrySchedule::default(),
            poll: Duration::from_millis(200),
            fan_out_batch: 500,
            concurrency: 16,
            connect_timeout: Duration::from_secs(5),
            timeout: Duration::from_secs(10),
        }
    }
}

/// Start the worker on the current tokio runtime; it runs until aborted.
pub fn spawn(db: PgPool, settings: WebhookSettings) -> Result<JoinHandle<()>, reqwest::Error> {
    let client = WebhookClient::new(
        settings.allow_private,
        settings.connect_timeout,
        settings.timeout,
    )?;
    Ok(tokio::spawn(run(db, settings, client)))
}

async fn run(db: PgPool, settings: WebhookSettings, client: WebhookClient) {
    let mut backoff = Duration::from_millis(100);
    loop {
        match round(&db, &settings, &client).await {
            Ok(busy) => {
                backoff = Duration::from_millis(100);
                if !busy {
                    tokio::time::sleep(settings.poll).await;
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, retry_in = ?backoff, "webhooks: database error");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(10));
            }
        }
    }
}

/// One round; true when there was work (so the next one comes at once).
async fn round(
    db: &PgPool,
    settings: &WebhookSettings,
    client: &WebhookClient,
) -> Result<bool, sqlx::Error> {
    let (rows, fanned) = store::fan_out(db, settings.fan_out_batch).await?;
    if fanned > 0 {
        metrics::counter!("stampede_webhook_fanned_out_total").increment(fanned);
    }
    // The lease outlasts the longest attempt.
    let lease_ms = (settings.timeout + Duration::from_secs(30)).as_millis() as i64;
    let due = store::claim_due(db, settings.concurrency, lease_ms).await?;
    let claimed = due.len();
    let results = join_all(due.iter().map(|due| attempt(db, settings, client, due))).await;
    for result in results {
        result?;
    }
    Ok(rows as i64 >= settings.fan_out_batch || claimed > 0)
}

/// POST one delivery and record what happened.
async fn attempt(
    db: &PgPool,
    settings: &WebhookSettings,
    client: &WebhookClient,
    due: &Due,
) -> Result<(), sqlx::Error> {
    let attempted_at = OffsetDateTime::now_utc();
    let body = serde_json::to_vec(&due.body).unwrap_or_default();
    let id = due.message_id.to_string();
    let timestamp = attempted_at.unix_timestamp();
    let answer = match signature::sign(&due.secret, &id, timestamp, &body) {
        Ok(signed) => {
            let headers = [
                ("webhook-id", id.clone()),
                ("webhook-timestamp", timestamp.to_string()),
                ("webhook-signature", signed),
            ];
            client.post(&due.url, &headers, body).await
        }
        Err(err) => client::Answer {
            status: None,
            error: Some("secret".to_owned()),
            latency: Duration::ZERO,
            excerpt: err.to_string(),
        },
    };
    let record = AttemptRecord {
        attempted_at,
        status_code: answer.status.map(|s| i32::from(s.as_u16())),
        error: answer.error.clone(),
        latency_ms: answer.latency.as_millis().min(i32::MAX as u128) as i32,
        response_excerpt: answer.excerpt.clone(),
    };
    let next = match answer.status {
        Some(status) if status.is_success() => Next::Succeeded,
        Some(reqwest::StatusCode::GONE) => Next::Failed {
            disable: Some(format!(
                "The endpoint answered 410 Gone on {}.",
                format_time(attempted_at)
            )),
        },
        _ => give_up_or_retry(db, settings, due, attempted_at).await?,
    };
    match &next {
        Next::Succeeded => {
            metrics::counter!("stampede_webhook_deliveries_total", "outcome" => "succeeded")
                .increment(1);
        }
        _ => {
            // No label with the endpoint's id: metrics name no object.
            metrics::counter!("stampede_webhook_failures_total").increment(1);
            tracing::info!(
                endpoint_id = %due.endpoint_id, webhook_id = %id,
                status = ?answer.status, error = ?answer.error,
                "webhook attempt failed"
            );
        }
    }
    if let Next::Failed { disable } = &next {
        metrics::counter!("stampede_webhook_deliveries_total", "outcome" => "failed").increment(1);
        if let Some(reason) = disable {
            tracing::warn!(endpoint_id = %due.endpoint_id, %reason, "webhook endpoint disabled");
        }
    }
    match store::record_attempt(db, due, &record, &next).await {
        // The endpoint was deleted during the attempt: nothing to record.
        Err(sqlx::Error::Database(err)) if err.is_foreign_key_violation() => Ok(()),
        other => other,
    }
}

/// After a failed attempt: retry after the schedule's delay, or give up
/// when that would pass the window; giving up disables the endpoint when
/// it has had no success since this delivery's first attempt.
async fn give_up_or_retry(
    db: &PgPool,
    settings: &WebhookSettings,
    due: &Due,
    now: OffsetDateTime,
) -> Result<Next, sqlx::Error> {
    let failures = u32::try_from(due.attempts + 1).unwrap_or(u32::MAX);
    let delay = settings
        .schedule
        .delay(failures, rand::rng().random_range(0.0..=1.0));
    let first = due.first_attempt_at.unwrap_or(now);
    let window =
        time::Duration::try_from(settings.schedule.window()).unwrap_or(time::Duration::MAX);
    let next_at = now + time::Duration::try_from(delay).unwrap_or(time::Duration::MAX);
    if next_at <= first + window {
        return Ok(Next::Retry(delay.as_millis().min(i64::MAX as u128) as i64));
    }
    let disable = if store::succeeded_since(db, due.endpoint_id, first).await? {
        None
    } else {
        Some(format!(
            "Every attempt failed from {} to {}, {} attempts of one message.",
            format_time(first),
            format_time(now),
            failures
        ))
    };
    Ok(Next::Failed { disable })
}
