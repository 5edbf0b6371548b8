//! The request budgets, timeouts, rate limits and quotas, as flags.

/// In-flight budgets and per-connection deadlines.
#[derive(Debug, Clone, clap::Args)]
pub struct LimitArgs {
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
    /// this, 429. 0 turns the cap off. Behind a balancer, see
    /// `--proxy-protocol` and `--trusted-proxies`.
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

    /// Open connections in all; past it, new connections are served for
    /// `/healthz` and `/readyz` only, from a small reserve of descriptors
    /// (anything else 503). 0: the open-file limit less 256 descriptors (or
    /// a sixteenth of it, if more).
    #[arg(
        long,
        env = "STAMPEDE_MAX_CONNECTIONS",
        default_value_t = 0,
        global = true
    )]
    pub max_connections: usize,

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

    /// Seconds to drain on SIGTERM before the listener closes: `/readyz`
    /// answers 503 meanwhile (everything else is served as before), so a
    /// balancer checking it stops sending requests here first. Set it
    /// above the balancer's check interval times its fall count.
    #[arg(
        long,
        env = "STAMPEDE_DRAIN_SECS",
        default_value_t = 0,
        value_parser = clap::value_parser!(u64).range(0..=300),
        global = true
    )]
    pub drain_secs: u64,

    /// Every connection starts with a PROXY protocol v2 header (HAProxy's
    /// `send-proxy-v2`) naming its client; one without is closed. With
    /// `--trusted-proxies`, only those peers may connect at all.
    #[arg(long, env = "STAMPEDE_PROXY_PROTOCOL", global = true)]
    pub proxy_protocol: bool,

    /// Balancers whose word about the client is taken, as CIDRs
    /// (`10.0.0.0/8,127.0.0.1/32`): from them, `X-Forwarded-For` is read
    /// right to left to the first address that is not one of them. From
    /// anyone else it is ignored.
    #[arg(
        long,
        env = "STAMPEDE_TRUSTED_PROXIES",
        value_delimiter = ',',
        value_parser = parse_cidr,
        global = true
    )]
    pub trusted_proxies: Vec<ipnet::IpNet>,
}

/// A CIDR, or a bare address (one host).
fn parse_cidr(raw: &str) -> Result<ipnet::IpNet, String> {
    let raw = raw.trim();
    raw.parse::<ipnet::IpNet>()
        .or_else(|_| raw.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("\"{raw}\" is not an address or a CIDR such as 10.0.0.0/8"))
}

/// Purchases per client address and per buyer email; API requests per account.
#[derive(Debug, Clone, clap::Args)]
pub struct RateArgs {
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

    /// Failed presale code checks (a `?code=` that unlocks nothing, a
    /// purchase refused for its code) one client address may make per event
    /// before each further one waits: 2 s, doubling, up to an hour. 0 turns
    /// the limit off.
    #[arg(
        long,
        env = "STAMPEDE_PRESALE_CODE_FAILURES_PER_IP",
        default_value_t = 5,
        global = true
    )]
    pub presale_code_failures_per_ip: u32,
}

/// What one organizer may have.
#[derive(Debug, Clone, clap::Args)]
pub struct QuotaArgs {
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

    /// Presale codes one event may have; creating more is 422.
    #[arg(
        long,
        env = "STAMPEDE_QUOTA_PRESALE_CODES_PER_EVENT",
        default_value_t = 10_000,
        value_parser = clap::value_parser!(i64).range(0..),
        global = true
    )]
    pub quota_presale_codes_per_event: i64,
}
