//! Settings from flags and environment, and the database connection.

use std::{net::SocketAddr, str::FromStr, time::Duration};

use anyhow::Context;
use sqlx::{
    ConnectOptions, Connection, PgPool,
    postgres::{PgConnectOptions, PgConnection, PgPoolOptions},
};

#[derive(Debug, clap::Parser)]
#[command(
    name = "stampede",
    version,
    about = "Ticketing for the on-sale rush: every ticket sold exactly once."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Postgres URL. Without it Stampede connects the way psql does (PG*
    /// variables, the local socket, the OS user) to the database `stampede`
    /// (or PGDATABASE), creating it if missing.
    #[arg(long, env = "DATABASE_URL", global = true)]
    pub database_url: Option<String>,

    /// Log format: `human` or `json`. Filter with RUST_LOG.
    #[arg(
        long,
        env = "STAMPEDE_LOG_FORMAT",
        default_value = "human",
        global = true
    )]
    pub log_format: LogFormat,

    #[command(flatten)]
    pub serve: ServeArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Run the web app (the default).
    Serve,
    /// Apply database migrations and exit.
    Migrate,
    /// Manage organizer accounts.
    Organizer {
        #[command(subcommand)]
        command: OrganizerCommand,
    },
}

#[derive(Debug, clap::Subcommand)]
pub enum OrganizerCommand {
    /// Create an organizer and print a fresh API token for it.
    Add {
        /// The organizer's email (their log-in).
        email: String,
        /// Read the password from the first line of standard input instead
        /// of prompting for it.
        #[arg(long)]
        password_stdin: bool,
        /// A name for the API token, shown on the settings page.
        #[arg(long, default_value = "command line")]
        token_name: String,
    },
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum LogFormat {
    Human,
    Json,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(
        long,
        env = "STAMPEDE_LISTEN",
        default_value = "127.0.0.1:3000",
        global = true
    )]
    pub listen: SocketAddr,

    /// Database connections in the pool. Under a rush the pool is the queue:
    /// more connections than cores mostly adds lock contention.
    #[arg(
        long,
        env = "STAMPEDE_DB_MAX_CONNECTIONS",
        default_value_t = 16,
        global = true
    )]
    pub db_max_connections: u32,

    /// Database connections kept open however quiet the site is: a sale
    /// opens after a quiet spell, and its first wave should not wait for
    /// connections to be made (sqlx closes idle ones after 10 minutes).
    #[arg(
        long,
        env = "STAMPEDE_DB_MIN_CONNECTIONS",
        default_value_t = 4,
        global = true
    )]
    pub db_min_connections: u32,

    /// How long a request waits for a database connection before it is
    /// answered 503 with Retry-After.
    #[arg(
        long,
        env = "STAMPEDE_DB_ACQUIRE_TIMEOUT_MS",
        default_value_t = 2000,
        global = true
    )]
    pub db_acquire_timeout_ms: u64,

    /// Requests handled at once, purchases and /healthz aside; beyond this,
    /// new ones get 503 at once.
    #[arg(
        long,
        env = "STAMPEDE_MAX_IN_FLIGHT",
        default_value_t = 2048,
        global = true
    )]
    pub max_in_flight: usize,

    /// Purchases handled at once (their own budget, apart from the rest);
    /// beyond this, new ones get 503 at once.
    #[arg(
        long,
        env = "STAMPEDE_MAX_PURCHASES_IN_FLIGHT",
        default_value_t = 1024,
        global = true
    )]
    pub max_purchases_in_flight: usize,

    /// Requests in flight from one client address (IPv6: one /64); beyond
    /// this, 429. 0 turns the cap off (behind a proxy, every request comes
    /// from the proxy's address).
    #[arg(
        long,
        env = "STAMPEDE_MAX_IN_FLIGHT_PER_IP",
        default_value_t = 64,
        global = true
    )]
    pub max_in_flight_per_ip: usize,

    /// Open connections from one client address (IPv6: one /64); beyond
    /// this, new ones are refused. 0 turns the cap off.
    #[arg(
        long,
        env = "STAMPEDE_MAX_CONNECTIONS_PER_IP",
        default_value_t = 256,
        global = true
    )]
    pub max_connections_per_ip: usize,

    /// Seconds a request head may take from its first byte to its end.
    #[arg(
        long,
        env = "STAMPEDE_HEADER_READ_TIMEOUT_SECS",
        default_value_t = 5,
        value_parser = clap::value_parser!(u64).range(1..),
        global = true
    )]
    pub header_read_timeout_secs: u64,

    /// Seconds a connection may stay open with no request before it is
    /// closed. Behind a load balancer, set it above the balancer's own.
    #[arg(
        long,
        env = "STAMPEDE_IDLE_TIMEOUT_SECS",
        default_value_t = 30,
        value_parser = clap::value_parser!(u64).range(1..),
        global = true
    )]
    pub idle_timeout_secs: u64,

    /// Seconds a request body may take to arrive whole; beyond, 408.
    #[arg(
        long,
        env = "STAMPEDE_BODY_READ_TIMEOUT_SECS",
        default_value_t = 5,
        value_parser = clap::value_parser!(u64).range(1..),
        global = true
    )]
    pub body_read_timeout_secs: u64,

    /// Seconds before a request is abandoned with 503.
    #[arg(
        long,
        env = "STAMPEDE_REQUEST_TIMEOUT_SECS",
        default_value_t = 15,
        global = true
    )]
    pub request_timeout_secs: u64,

    /// How purchases are sold: `batch` (group commit per ticket type, the
    /// default), or the baselines `naive` and `for-update` (one transaction
    /// per purchase), `redis-watch` and `redis-lock` (a Redis counter before
    /// `naive`); the baselines are for comparison only. One strategy per
    /// database.
    #[arg(
        long,
        env = "STAMPEDE_SALE_STRATEGY",
        default_value = "batch",
        global = true
    )]
    pub sale_strategy: crate::sale::Strategy,

    /// Redis, for the gate (`--redis-gate`) and the `redis-watch` and
    /// `redis-lock` baselines.
    #[arg(
        long,
        env = "STAMPEDE_REDIS_URL",
        default_value = "redis://127.0.0.1:6379",
        global = true
    )]
    pub redis_url: String,

    /// Check and count purchases in Redis (`--redis-url`) before Postgres,
    /// so that about as many purchases as there are tickets reach the
    /// database. Off by default; Postgres keeps the last word either way.
    #[arg(long, env = "STAMPEDE_REDIS_GATE", global = true)]
    pub redis_gate: bool,

    /// The gate on a Redis Cluster: some of its nodes, comma-separated
    /// (`host:port` or `redis://host:port`; the others are discovered).
    /// Set, the gate uses the cluster instead of `--redis-url`.
    #[arg(
        long,
        env = "STAMPEDE_REDIS_CLUSTER_NODES",
        value_delimiter = ',',
        global = true
    )]
    pub redis_cluster_nodes: Vec<String>,

    /// The gate: the prefix of its Redis keys. Instances selling the same
    /// database share it; apps sharing one Redis each have their own.
    #[arg(
        long,
        env = "STAMPEDE_REDIS_GATE_PREFIX",
        default_value = "stampede:gate:",
        global = true
    )]
    pub redis_gate_prefix: String,

    /// The gate: milliseconds a Redis call may take before the purchase
    /// goes to Postgres alone.
    #[arg(
        long,
        env = "STAMPEDE_REDIS_GATE_TIMEOUT_MS",
        default_value_t = 100,
        value_parser = clap::value_parser!(u64).range(1..),
        global = true
    )]
    pub redis_gate_timeout_ms: u64,

    /// The gate: seconds between rebuilds of its counters from Postgres,
    /// the longest a crash between Redis and Postgres keeps tickets unsold.
    #[arg(
        long,
        env = "STAMPEDE_REDIS_GATE_RECONCILE_SECS",
        default_value_t = 10,
        value_parser = clap::value_parser!(u64).range(1..),
        global = true
    )]
    pub redis_gate_reconcile_secs: u64,

    /// The gate: a published sale's counters are built in Redis once it
    /// opens within this many seconds (and at its publication), not at its
    /// first purchase; 0: at its first purchase.
    #[arg(
        long,
        env = "STAMPEDE_REDIS_GATE_AHEAD_SECS",
        default_value_t = 900,
        // Up to a week: Postgres's interval arithmetic has to hold it.
        value_parser = clap::value_parser!(u64).range(0..=7 * 24 * 3600),
        global = true
    )]
    pub redis_gate_ahead_secs: u64,

    /// `batch`: purchases of one ticket type sold in one transaction at most.
    #[arg(
        long,
        env = "STAMPEDE_BATCH_MAX",
        default_value_t = 512,
        value_parser = clap::value_parser!(u32).range(1..=10_000),
        global = true
    )]
    pub batch_max: u32,

    /// `batch`: purchases waiting per ticket type at most; beyond, 503 at once.
    #[arg(
        long,
        env = "STAMPEDE_BATCH_QUEUE",
        default_value_t = 4096,
        value_parser = clap::value_parser!(u32).range(1..),
        global = true
    )]
    pub batch_queue: u32,

    /// Purchases one client address (IPv6: one /64) may make at once, then
    /// one per purchase period; beyond, 429 with the real wait. 0 turns the
    /// limit off: only for loopback benchmarks, where every buyer is
    /// 127.0.0.1, or behind a proxy that limits instead.
    #[arg(
        long,
        env = "STAMPEDE_PURCHASE_BURST_PER_IP",
        default_value_t = 30,
        global = true
    )]
    pub purchase_burst_per_ip: u32,

    /// Purchases one buyer email may make at once, then one per purchase
    /// period; beyond, 429. 0 turns the limit off.
    #[arg(
        long,
        env = "STAMPEDE_PURCHASE_BURST_PER_EMAIL",
        default_value_t = 5,
        global = true
    )]
    pub purchase_burst_per_email: u32,

    /// Milliseconds to earn one more purchase, per address and per email.
    #[arg(
        long,
        env = "STAMPEDE_PURCHASE_PERIOD_MS",
        default_value_t = 2000,
        value_parser = clap::value_parser!(u64).range(1..),
        global = true
    )]
    pub purchase_period_ms: u64,

    /// Organizer API requests per account (all its tokens together) and
    /// minute, all usable at once
    /// and refilled evenly; beyond, 429 with the real `Retry-After`. 0
    /// turns the limit off.
    #[arg(
        long,
        env = "STAMPEDE_API_REQUESTS_PER_MINUTE",
        default_value_t = 600,
        global = true
    )]
    pub api_requests_per_minute: u32,

    /// The key that signs waiting-room passes and entry tokens (at least 32
    /// characters). Every instance of one deployment must share it: unset,
    /// each process draws its own at start (with a warning), and a pass
    /// from one instance is refused by the others.
    #[arg(
        long,
        env = "STAMPEDE_WAITING_ROOM_KEY",
        hide_env_values = true,
        global = true
    )]
    pub waiting_room_key: Option<String>,

    /// The key held orders' confirmation links are derived with (at least
    /// 32 characters). Every instance of one deployment must share it:
    /// unset, each process draws its own at start (with a warning), and a
    /// link mailed by one instance is refused by the others.
    #[arg(
        long,
        env = "STAMPEDE_CONFIRM_KEY",
        hide_env_values = true,
        global = true
    )]
    pub confirm_key: Option<String>,

    /// The SMTP server that mails confirmation links of held orders:
    /// `smtp://host:port` (plain; add `?tls=required` for STARTTLS),
    /// `smtps://host` (TLS),
    /// with `user:password@` if it needs a log-in. Unset, the links are
    /// logged instead (for development).
    #[arg(long, env = "STAMPEDE_SMTP_URL", hide_env_values = true, global = true)]
    pub smtp_url: Option<String>,

    /// The sender of the mails.
    #[arg(
        long,
        env = "STAMPEDE_MAIL_FROM",
        default_value = "Stampede <tickets@localhost>",
        global = true
    )]
    pub mail_from: String,

    /// The address buyers reach the site at; links in mails start with it.
    /// Default: http:// and the listen address.
    #[arg(long, env = "STAMPEDE_PUBLIC_URL", global = true)]
    pub public_url: Option<String>,

    /// How often each instance looks for expired holds, in milliseconds.
    #[arg(
        long,
        env = "STAMPEDE_HOLD_SWEEP_MS",
        default_value_t = 2000,
        value_parser = clap::value_parser!(u64).range(50..=60_000),
        global = true
    )]
    pub hold_sweep_ms: u64,

    /// Waiting-room entries one client address (IPv6: one /64) may hold per
    /// event; beyond, 429.
    #[arg(
        long,
        env = "STAMPEDE_WAITING_ROOM_ENTRIES_PER_CLIENT",
        default_value_t = crate::waiting_room::DEFAULT_ENTRIES_PER_CLIENT,
        value_parser = clap::value_parser!(u32).range(1..),
        global = true
    )]
    pub waiting_room_entries_per_client: u32,

    /// The waiting room's proof of work: leading zero bits of SHA-256 a
    /// joiner must find, 2^bits hashes on average (18: 262,144, about a
    /// second in a phone's browser). 0 asks for no work (each solution
    /// still joins once).
    #[arg(
        long,
        env = "STAMPEDE_WAITING_ROOM_PROOF_BITS",
        default_value_t = crate::waiting_room::DEFAULT_PROOF_BITS,
        value_parser = clap::value_parser!(u32).range(0..=i64::from(crate::waiting_room::MAX_PROOF_BITS)),
        global = true
    )]
    pub waiting_room_proof_bits: u32,

    /// Milliseconds a page of the public event list (`/`, `/api/v1/events`)
    /// is served from memory, shared by all requests; 0 turns it off.
    #[arg(
        long,
        env = "STAMPEDE_LIST_CACHE_MS",
        default_value_t = 1000,
        global = true
    )]
    pub list_cache_ms: u64,

    /// Events one organizer may have published at once.
    #[arg(
        long,
        env = "STAMPEDE_QUOTA_PUBLISHED_EVENTS",
        default_value_t = 100,
        value_parser = clap::value_parser!(i64).range(0..),
        global = true
    )]
    pub quota_published_events: i64,

    /// Ticket types one event may have (at most 20, what the forms carry).
    #[arg(
        long,
        env = "STAMPEDE_QUOTA_TICKET_TYPES_PER_EVENT",
        default_value_t = 20,
        value_parser = clap::value_parser!(i64).range(1..=20),
        global = true
    )]
    pub quota_ticket_types_per_event: i64,

    /// Tickets (the sum of capacities) over all of one organizer's events
    /// that are not cancelled.
    #[arg(
        long,
        env = "STAMPEDE_QUOTA_TOTAL_CAPACITY",
        default_value_t = 1_000_000,
        value_parser = clap::value_parser!(i64).range(0..),
        global = true
    )]
    pub quota_total_capacity: i64,

    /// Mark cookies `Secure`; set this when Stampede is served over https.
    #[arg(long, env = "STAMPEDE_SECURE_COOKIES", global = true)]
    pub secure_cookies: bool,

    /// RabbitMQ for the outbox relay, e.g. `amqp://guest:guest@127.0.0.1:5672/%2f`.
    /// Unset: no relay (the outbox still records every change).
    #[arg(long, env = "AMQP_URL", global = true)]
    pub amqp_url: Option<String>,

    /// The durable topic exchange the relay publishes to.
    #[arg(
        long,
        env = "STAMPEDE_AMQP_EXCHANGE",
        default_value = "stampede.events",
        value_parser = exchange_name,
        global = true
    )]
    pub amqp_exchange: String,

    /// Outbox rows the relay reads and publishes per round at most.
    #[arg(
        long,
        env = "STAMPEDE_OUTBOX_BATCH",
        default_value_t = 500,
        value_parser = clap::value_parser!(u32).range(1..=10_000),
        global = true
    )]
    pub outbox_batch: u32,

    /// Milliseconds between an idle relay's looks for new outbox rows.
    #[arg(
        long,
        env = "STAMPEDE_OUTBOX_POLL_MS",
        default_value_t = 50,
        value_parser = clap::value_parser!(u64).range(1..=60_000),
        global = true
    )]
    pub outbox_poll_ms: u64,

    /// Hours a sent outbox row is kept before it is deleted.
    #[arg(
        long,
        env = "STAMPEDE_OUTBOX_RETENTION_HOURS",
        default_value_t = 168,
        value_parser = clap::value_parser!(u64).range(1..=87_600),
        global = true
    )]
    pub outbox_retention_hours: u64,

    /// Let webhook endpoints be at loopback, private and link-local
    /// addresses, and use plain http. Off by default: only for tests and
    /// private networks.
    #[arg(long, env = "STAMPEDE_WEBHOOKS_ALLOW_PRIVATE", global = true)]
    pub webhooks_allow_private: bool,

    /// The webhook retry schedule's base in milliseconds: retries come
    /// after 1, 60, 360, 1440, 3600 then 7200 times it (5 s, 5 min, 30 min,
    /// 2 h, 5 h, 10 h...) with jitter, for 51840 times it (3 days). Tests
    /// shrink it.
    #[arg(
        long,
        env = "STAMPEDE_WEBHOOK_RETRY_BASE_MS",
        default_value_t = 5000,
        value_parser = clap::value_parser!(u64).range(1..=3_600_000),
        global = true
    )]
    pub webhook_retry_base_ms: u64,
}

/// Connection options from a URL, or libpq-style defaults (PG* variables,
/// local socket, OS user) with the database `stampede` unless PGDATABASE says.
pub fn connect_options(database_url: Option<&str>) -> anyhow::Result<PgConnectOptions> {
    let options = match database_url {
        Some(url) => {
            PgConnectOptions::from_str(url).context("DATABASE_URL is not a valid Postgres URL")?
        }
        None => {
            let options = PgConnectOptions::new();
            if std::env::var_os("PGDATABASE").is_some() {
                options
            } else {
                options.database("stampede")
            }
        }
    };
    Ok(options.log_statements(tracing::log::LevelFilter::Trace))
}

/// Create the target database if it does not exist yet.
pub async fn ensure_database(options: &PgConnectOptions) -> anyhow::Result<()> {
    let Some(name) = options.get_database().map(str::to_owned) else {
        return Ok(());
    };
    match PgConnection::connect_with(options).await {
        Ok(conn) => {
            conn.close().await?;
            Ok(())
        }
        Err(sqlx::Error::Database(err)) if err.code().as_deref() == Some("3D000") => {
            let mut admin = PgConnection::connect_with(&options.clone().database("postgres"))
                .await
                .context("connecting to the `postgres` database to create ours")?;
            let quoted = format!("\"{}\"", name.replace('"', "\"\""));
            match sqlx::query(&format!("CREATE DATABASE {quoted}"))
                .execute(&mut admin)
                .await
            {
                // Another instance may have created it a moment ago.
                Err(sqlx::Error::Database(err)) if err.code().as_deref() == Some("42P04") => {}
                other => {
                    other.with_context(|| format!("creating database {name}"))?;
                    tracing::info!(database = %name, "created database");
                }
            }
            Ok(())
        }
        Err(err) => Err(err).context("connecting to Postgres"),
    }
}

pub async fn connect_pool(options: PgConnectOptions, args: &ServeArgs) -> anyhow::Result<PgPool> {
    anyhow::ensure!(
        args.db_min_connections <= args.db_max_connections,
        "--db-min-connections ({}) must not be more than --db-max-connections ({})",
        args.db_min_connections,
        args.db_max_connections,
    );
    ensure_database(&options).await?;
    let pool = PgPoolOptions::new()
        .max_connections(args.db_max_connections)
        .min_connections(args.db_min_connections)
        .acquire_timeout(Duration::from_millis(args.db_acquire_timeout_ms))
        .connect_with(options)
        .await
        .context("connecting to Postgres")?;
    Ok(pool)
}

pub async fn migrate(pool: &PgPool) -> anyhow::Result<()> {
    sqlx::migrate!("./migrations")
        .run(pool)
        .await
        .context("applying migrations")?;
    Ok(())
}

/// An AMQP exchange name: 1 to 127 letters, digits, `-`, `_`, `.` or `:`
/// (the broker's own rule), and not one of the broker's `amq.` names.
fn exchange_name(name: &str) -> Result<String, String> {
    let valid = (1..=127).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
        && !name.starts_with("amq.");
    if valid {
        Ok(name.to_owned())
    } else {
        Err("1 to 127 of [A-Za-z0-9-_.:], not starting with `amq.`".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn serve_args(flags: &[&str]) -> ServeArgs {
        Cli::parse_from(std::iter::once("stampede").chain(flags.iter().copied())).serve
    }

    #[sqlx::test]
    async fn the_pool_opens_its_minimum_at_once_and_refuses_one_over_the_maximum(pool: PgPool) {
        let options = (*pool.connect_options()).clone();
        let args = serve_args(&["--db-min-connections", "3", "--db-max-connections", "5"]);
        let kept = connect_pool(options.clone(), &args).await.unwrap();
        assert!(kept.size() >= 3, "{} connections open", kept.size());
        kept.close().await;

        let args = serve_args(&["--db-min-connections", "6", "--db-max-connections", "5"]);
        let err = connect_pool(options, &args).await.unwrap_err().to_string();
        assert!(err.contains("--db-min-connections (6)"), "{err}");
    }
}
