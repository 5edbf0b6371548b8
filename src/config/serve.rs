//! `stampede serve`'s flags (every one also an environment variable), in
//! the order `--help` lists them: the site's own here, each area's in a
//! group of its own.

use std::net::SocketAddr;

use super::{
    DatabaseArgs, LimitArgs, OutboxArgs, PaymentArgs, QuotaArgs, RateArgs, SaleArgs, WebhookArgs,
};

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

    /// Address of a listener of its own for `GET /metrics` (Prometheus
    /// text), e.g. `127.0.0.1:9187`. Unset, metrics are not served; the
    /// site's listener never serves them.
    #[arg(long, env = "STAMPEDE_METRICS_LISTEN", global = true)]
    pub metrics_listen: Option<SocketAddr>,

    #[command(flatten)]
    pub database: DatabaseArgs,

    #[command(flatten)]
    pub limits: LimitArgs,

    #[command(flatten)]
    pub sale: SaleArgs,

    #[command(flatten)]
    pub rates: RateArgs,

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

    /// The time zone of events whose organizer names none: an IANA name
    /// such as Europe/Berlin. Each event keeps its own (its form's and the
    /// API's `time_zone`).
    #[arg(
        long,
        env = "STAMPEDE_TIME_ZONE",
        default_value = "UTC",
        value_parser = crate::domain::Zone::parse,
        global = true
    )]
    pub time_zone: crate::domain::Zone,

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

    #[command(flatten)]
    pub quotas: QuotaArgs,

    /// Mark cookies `Secure`; set this when Stampede is served over https.
    #[arg(long, env = "STAMPEDE_SECURE_COOKIES", global = true)]
    pub secure_cookies: bool,

    #[command(flatten)]
    pub outbox: OutboxArgs,

    #[command(flatten)]
    pub webhooks: WebhookArgs,

    #[command(flatten)]
    pub payments: PaymentArgs,
}
