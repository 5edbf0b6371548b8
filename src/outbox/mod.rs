//! The outbox relay: an in-process task that publishes the rows of the
//! transactional outbox (migrations/0008_outbox.sql) to RabbitMQ.
//!
//! Every change of an order's state writes its outbox row in the
//! transaction that makes the change (`sql/`), so a message exists exactly
//! when the change committed. The outbox is append-only; the relay keeps a
//! cursor (migrations/0014_outbox_cursors.sql) and, in rounds:
//! 1. locks its cursor (`FOR UPDATE SKIP LOCKED`: while one instance's
//!    relay holds it, the others' rounds read nothing) and reads up to
//!    `batch` rows after it, in log order, from ended transactions;
//! 2. publishes each to the durable topic exchange (routing key = the
//!    message type, persistent, `message_id` = the row's id) on a channel
//!    with publisher confirms;
//! 3. moves the cursor past the rows the broker confirmed without a gap,
//!    and commits.
//!
//! A crash anywhere before 3 leaves the cursor where it was: the rows go
//! again later.
//! Delivery is therefore at least once; consumers drop duplicates by
//! message id and order one order's messages by their sequence. When the
//! broker goes away the relay reconnects with back-off; the outbox keeps
//! recording meanwhile. Rows older than the retention that every consumer
//! has handled are deleted, a batch at a time.

mod publisher;

use std::{str::FromStr, time::Duration};

use lapin::uri::{AMQPScheme, AMQPUri};
use sqlx::PgPool;
use time::OffsetDateTime;
use tokio::task::JoinHandle;

use crate::db::{self, outbox::Consumer};
use publisher::Publisher;

/// Rows deleted per retention statement.
const DELETE_BATCH: i64 = 1000;

/// How the relay runs (`stampede serve --amqp-url ...`).
#[derive(Debug, Clone)]
pub struct RelaySettings {
    /// The broker, e.g. `amqp://guest:guest@127.0.0.1:5672/%2f`.
    pub amqp_url: String,
    /// The durable topic exchange messages go to.
    pub exchange: String,
    /// Rows claimed and published per round at most.
    pub batch: i64,
    /// How often an idle relay looks for new rows.
    pub poll: Duration,
    /// Sent rows older than this are deleted.
    pub retention: Duration,
    /// How often the retention runs.
    pub retention_every: Duration,
    /// The longest a round waits for the broker's confirms.
    pub confirm_timeout: Duration,
    /// Reconnection back-off: first and longest wait.
    pub backoff_min: Duration,
    pub backoff_max: Duration,
}

impl RelaySettings {
    /// Settings for `amqp_url` with the defaults; refuses a URL that cannot
    /// work, with a message that says why.
    pub fn new(amqp_url: &str) -> Result<Self, String> {
        // The URL itself is never echoed: it may hold a password.
        let uri = AMQPUri::from_str(amqp_url)
            .map_err(|err| format!("--amqp-url is not an AMQP URL: {err}"))?;
        if uri.scheme == AMQPScheme::AMQPS {
            return Err("--amqp-url: amqps (TLS) is not built into this binary; \
                        use amqp:// on a trusted network or a local TLS tunnel"
                .to_owned());
        }
        Ok(Self {
            amqp_url: amqp_url.to_owned(),
            exchange: "stampede.events".to_owned(),
            batch: 500,
            poll: Duration::from_millis(50),
            retention: Duration::from_secs(7 * 24 * 3600),
            retention_every: Duration::from_secs(60),
            confirm_timeout: Duration::from_secs(30),
            backoff_min: Duration::from_millis(100),
            // A connection attempt to a broker that is down costs nothing
            // much; a long wait is the delay of every message once it is
            // back (10 s was 13 s of catch-up after a restart).
            backoff_max: Duration::from_secs(2),
        })
    }
}

/// Why a round stopped.
#[derive(Debug, thiserror::Error)]
enum RoundError {
    #[error("broker: {0}")]
    Broker(String),
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

/// Start the relay on the current tokio runtime. It runs until aborted;
/// an abort mid-round leaves that round's rows unsent (sent again later).
pub fn spawn(db: PgPool, settings: RelaySettings) -> JoinHandle<()> {
    tokio::spawn(run(db, settings))
}

/// The relay's loop: connect, publish rounds, reconnect when the broker
/// goes away.
pub async fn run(db: PgPool, settings: RelaySettings) {
    let mut backoff = settings.backoff_min;
    let mut last_retention: Option<tokio::time::Instant> = None;
    loop {
        let publisher = match Publisher::connect(&settings).await {
            Ok(publisher) => {
                tracing::info!(exchange = %settings.exchange, "outbox relay connected");
                metrics::gauge!("stampede_outbox_relay_up").set(1.0);
                backoff = settings.backoff_min;
                publisher
            }
            Err(err) => {
                metrics::gauge!("stampede_outbox_relay_up").set(0.0);
                metrics::counter!("stampede_outbox_connect_failures_total").increment(1);
                tracing::warn!(error = %err, retry_in = ?backoff, "outbox relay cannot reach the broker");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(settings.backoff_max);
                continue;
            }
        };
        loop {
            if last_retention.is_none_or(|at| at.elapsed() >= settings.retention_every) {
                last_retention = Some(tokio::time::Instant::now());
                delete_old(&db, settings.retention).await;
            }
            match round(&db, &publisher, &settings).await {
                Ok(sent) if sent as i64 >= settings.batch => {}
                Ok(_) => tokio::time::sleep(settings.poll).await,
                Err(RoundError::Broker(err)) => {
                    metrics::gauge!("stampede_outbox_relay_up").set(0.0);
                    tracing::warn!(error = %err, "outbox relay lost the broker; reconnecting");
                    publisher.close().await;
                    break;
                }
                Err(RoundError::Database(err)) => {
                    tracing::warn!(error = %err, retry_in = ?backoff, "outbox relay: database error");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(settings.backoff_max);
                }
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(settings.backoff_max);
    }
}

/// One round: read after the cursor, publish, move the cursor past what
/// the broker confirmed. Returns how many rows were read.
async fn round(
    db: &PgPool,
    publisher: &Publisher,
    settings: &RelaySettings,
) -> Result<usize, RoundError> {
    let mut tx = db.begin().await?;
    let rows = db::outbox::read_after_cursor(&mut tx, Consumer::Amqp, settings.batch).await?;
    if rows.is_empty() {
        tx.commit().await?;
        return Ok(0);
    }
    let outcome = publisher.publish_all(&rows, settings.confirm_timeout).await;
    let sent = &rows[..outcome.confirmed];
    if let Some(last) = sent.last() {
        let now = db::outbox::move_cursor(&mut tx, Consumer::Amqp, last).await?;
        tx.commit().await?;
        for row in sent {
            let lag = (now - row.created_at).as_seconds_f64();
            metrics::histogram!("stampede_outbox_lag_seconds").record(lag);
        }
        metrics::counter!("stampede_outbox_published_total").increment(sent.len() as u64);
    }
    let failed = rows.len() - sent.len();
    if failed > 0 {
        metrics::counter!("stampede_outbox_failed_total").increment(failed as u64);
    }
    match outcome.error {
        Some(err) => Err(RoundError::Broker(err)),
        None => Ok(rows.len()),
    }
}

/// Delete rows older than `retention` that every consumer has handled, a
/// batch per statement.
async fn delete_old(db: &PgPool, retention: Duration) {
    let Ok(retention) = time::Duration::try_from(retention) else {
        return;
    };
    let before = OffsetDateTime::now_utc() - retention;
    loop {
        match db::outbox::delete_handled(db, before, DELETE_BATCH).await {
            Ok(deleted) => {
                metrics::counter!("stampede_outbox_deleted_total").increment(deleted);
                if deleted < DELETE_BATCH as u64 {
                    return;
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, "outbox retention failed");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RelaySettings;

    #[test]
    fn bad_broker_urls_are_refused_without_echoing_them() {
        for url in [
            "not a url",
            "http://127.0.0.1:5672",
            "amqps://u:hunter2@host/%2f",
        ] {
            let err = RelaySettings::new(url).err().unwrap_or_default();
            assert!(err.starts_with("--amqp-url"), "{url}: {err:?}");
            assert!(!err.contains("hunter2"), "{err}");
        }
        let settings = RelaySettings::new("amqp://guest:guest@127.0.0.1:5672/%2f");
        assert_eq!(
            settings.map(|s| s.exchange).ok().as_deref(),
            Some("stampede.events")
        );
    }
}
