//! The sale's engine and the Redis gate, as flags.

#[derive(Debug, Clone, clap::Args)]
pub struct SaleArgs {
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

    /// Held orders: unconfirmed tickets one client address (IPv6: one /64)
    /// may hold per event for mailboxes not yet proven (no held order of
    /// theirs confirmed from its mail yet); beyond, 429. 0 turns it off.
    /// Behind a balancer, see `--proxy-protocol` and `--trusted-proxies`.
    #[arg(
        long,
        env = "STAMPEDE_HELD_PER_ADDRESS",
        default_value_t = 10,
        value_parser = clap::value_parser!(u32).range(0..=100_000),
        global = true
    )]
    pub held_per_address: u32,

    /// Held orders: minutes a hold for a mailbox not yet proven lasts at
    /// most (the event's own hold when that is shorter); a proven mailbox
    /// gets the event's full hold.
    #[arg(
        long,
        env = "STAMPEDE_UNPROVEN_HOLD_MINUTES",
        default_value_t = 10,
        value_parser = clap::value_parser!(u64).range(1..=7 * 24 * 60),
        global = true
    )]
    pub unproven_hold_minutes: u64,
}

impl SaleArgs {
    pub fn hold_rules(&self) -> crate::sale::HoldRules {
        crate::sale::HoldRules {
            per_address: i32::try_from(self.held_per_address).unwrap_or(i32::MAX),
            unproven: std::time::Duration::from_secs(self.unproven_hold_minutes * 60),
        }
    }
}
