//! Where the gate counts, how long it waits, and how it fails.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateRedis {
    /// One Redis server (a `redis://` URL).
    Server(String),
    /// A Redis Cluster, known by some of its nodes (`host:port` or
    /// `redis://host:port`); the others are discovered.
    Cluster(Vec<String>),
}

/// For logs: where the gate counts, without the URL's password.
impl std::fmt::Display for GateRedis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Server(url) => f.write_str(&without_password(url)),
            Self::Cluster(nodes) => {
                let nodes: Vec<_> = nodes.iter().map(|node| without_password(node)).collect();
                write!(f, "cluster {}", nodes.join(","))
            }
        }
    }
}

/// `redis://user:secret@host` as `redis://user:***@host`; text that is
/// not a URL with a password as it is.
fn without_password(url: &str) -> std::borrow::Cow<'_, str> {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            // A URL with a password has a host, so this cannot fail.
            let _ = parsed.set_password(Some("***"));
            parsed.to_string().into()
        }
        _ => url.into(),
    }
}

#[derive(Debug, Clone)]
pub struct GateSettings {
    /// Each Redis call waits this long at most (a rebuild ten times this).
    pub timeout: Duration,
    /// The ticket types this instance sells are rebuilt from Postgres this
    /// often: what a crash between the gate and the commit can keep unsold.
    pub reconcile_every: Duration,
    /// After a Redis failure, purchases skip the gate for this long.
    pub retry_after: Duration,
    /// Admission records (and idle stock hashes) expire after this.
    pub record_ttl: Duration,
    /// Prepended to every key (tests isolate themselves with it).
    pub prefix: String,
    /// The counters of a published sale are built once it opens within
    /// this (when it is published, at start-up, every `reconcile_every`),
    /// not at its first purchase; `None`: at its first purchase.
    pub build_ahead: Option<Duration>,
    /// An admission neither settled nor given back within this is taken for
    /// lost (its instance died) and no longer holds back the rebuilds that
    /// wait for quiet. Longer than any purchase takes.
    pub settle_within: Duration,
}

impl GateSettings {
    /// Connecting (and a rebuild) gets a longer budget than a purchase's
    /// call: the first purchases of a burst all wait for the one connection.
    pub(super) fn connect_timeout(&self) -> Duration {
        (self.timeout * 10).max(Duration::from_secs(1))
    }
}

impl Default for GateSettings {
    fn default() -> Self {
        Self {
            timeout: Duration::from_millis(100),
            reconcile_every: Duration::from_secs(10),
            retry_after: Duration::from_secs(1),
            record_ttl: Duration::from_secs(24 * 3600),
            prefix: "stampede:gate:".to_owned(),
            settle_within: Duration::from_secs(30),
            build_ahead: Some(Duration::from_secs(15 * 60)),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("redis did not answer within {0:?}")]
    Timeout(Duration),
    #[error("postgres: {0}")]
    Db(#[from] sqlx::Error),
    #[error("unexpected answer from the gate script: {0}")]
    Answer(String),
}
