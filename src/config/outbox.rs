//! What leaves through the outbox: the AMQP relay and the webhooks, as
//! flags.

/// The outbox relay to RabbitMQ.
#[derive(Debug, Clone, clap::Args)]
pub struct OutboxArgs {
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
}

/// Webhook deliveries.
#[derive(Debug, Clone, clap::Args)]
pub struct WebhookArgs {
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
