//! Command-line flags.

use std::{path::PathBuf, str::FromStr};

#[derive(Debug, clap::Parser)]
#[command(
    name = "stampede-load",
    version,
    about = "Play a flash sale against a running Stampede and check the result from Postgres."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Set up a scenario's event, play it, count what committed, check the
    /// invariants, and print a table (or JSON).
    Run(Box<RunArgs>),
    /// Print a markdown table from `run --json` reports (one per line);
    /// repeated runs of one label show the run with the median throughput.
    Table(TableArgs),
    /// The waiting room's benchmarks: queue joins per second, position
    /// views against the trivial route, a full on-sale (prints JSON).
    Queue(Box<QueueArgs>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScenarioKind {
    /// Seed 000: 200 buyers at once for 10 tickets, 1-4 each.
    Seed000,
    /// Seed 001: 10,000 attempts for 100 tickets, one each.
    Seed001,
    /// One ticket type with more tickets than the run can sell: sustained
    /// purchase throughput on the hot row.
    Hot,
    /// Sell out 100 tickets, then keep hammering: refusals per second.
    Sellout,
    /// Buyers refreshing the event page.
    RushPage,
    /// Purchases spread over many events, one ticket type each.
    ManyEvents,
    /// `GET` of an unknown `/api/` path: the JSON 404, the trivial route.
    Trivial,
    /// `GET /healthz`.
    Health,
    /// `GET /` of a bare hello-world server (examples/hello.rs).
    Hello,
}

impl ScenarioKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Seed000 => "seed000",
            Self::Seed001 => "seed001",
            Self::Hot => "hot",
            Self::Sellout => "sellout",
            Self::RushPage => "rush-page",
            Self::ManyEvents => "many-events",
            Self::Trivial => "trivial",
            Self::Health => "health",
            Self::Hello => "hello",
        }
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// What the buyers do; each scenario has its own defaults for the flags
    /// below.
    #[arg(value_enum)]
    pub scenario: ScenarioKind,

    /// The server's base URL (plain http). Repeat it for several app
    /// instances: connections are spread over them in turn.
    #[arg(long = "url", default_value = "http://127.0.0.1:3000")]
    pub urls: Vec<String>,

    /// Postgres, for setting up the event and counting committed orders
    /// (not used by `trivial`, `health` and `hello`). Without it, connect as
    /// the server does: like psql, to the database `stampede`.
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: Option<String>,

    /// Buy through the JSON API, or through the HTML form as a browser does
    /// (GET the event page for its CSRF cookie, token and idempotency key,
    /// then POST the form and expect a 303).
    #[arg(long, value_enum, default_value = "api")]
    pub via: Via,

    /// Virtual buyers: connections, each sending one attempt after another
    /// (closed loop), or sharing the `--rate` schedule (open loop).
    #[arg(long)]
    pub concurrency: Option<usize>,

    /// Open loop: attempts per second in all, on a fixed schedule; latency
    /// counts from each attempt's scheduled start (no coordinated omission).
    #[arg(long)]
    pub rate: Option<f64>,

    /// Stop after this many attempts.
    #[arg(long)]
    pub attempts: Option<u64>,

    /// Stop starting attempts after this many seconds.
    #[arg(long)]
    pub duration: Option<f64>,

    /// Tickets per ticket type.
    #[arg(long)]
    pub tickets: Option<i32>,

    /// Tickets per attempt: a number, or a range such as `1-4` (uniform).
    #[arg(long)]
    pub quantity: Option<QuantitySpec>,

    /// Events in `many-events` (one ticket type each).
    #[arg(long)]
    pub events: Option<usize>,

    /// Seconds a buyer waits for an answer before giving up on it.
    #[arg(long, default_value_t = 10.0)]
    pub timeout: f64,

    /// Tokio worker threads of the generator.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,

    /// Wait up to this many seconds for `GET /healthz` to answer 2xx first.
    #[arg(long, default_value_t = 0.0)]
    pub wait_ready: f64,

    /// Report the CPU time these processes (the servers) used during the run.
    #[arg(long = "server-pid")]
    pub server_pids: Vec<u32>,

    /// Also report Postgres transactions (commits + rollbacks of the
    /// database, from pg_stat_database) during the run; waits ~11 s at the
    /// end for idle backends to flush their statistics.
    #[arg(long)]
    pub pg_stats: bool,

    /// A name for this run in reports and tables.
    #[arg(long)]
    pub label: Option<String>,

    /// The events hold their orders this many minutes for the buyer's
    /// confirmation by mail (issue 13): the hold path instead of the sale.
    #[arg(long, value_parser = clap::value_parser!(i32).range(1..=120))]
    pub hold_minutes: Option<i32>,

    /// Stripe takes the events' prices (issue 35): every order is held for
    /// its payment, as a paid sale's are.
    #[arg(long)]
    pub paid: bool,

    /// Print the report as one line of JSON instead of a table.
    #[arg(long)]
    pub json: bool,

    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Debug, Clone, clap::Args)]
pub struct TableArgs {
    /// Files of `run --json` reports, one per line.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    Api,
    Form,
}

/// Tickets per attempt: `min..=max`, drawn uniformly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct QuantitySpec {
    pub min: u32,
    pub max: u32,
}

impl QuantitySpec {
    pub const ONE: Self = Self { min: 1, max: 1 };
}

impl FromStr for QuantitySpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let number = |part: &str| {
            part.trim()
                .parse::<u32>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("`{s}` is not a quantity: use N or MIN-MAX, N >= 1"))
        };
        let (min, max) = match s.split_once('-') {
            Some((min, max)) => (number(min)?, number(max)?),
            None => (number(s)?, number(s)?),
        };
        if min > max {
            return Err(format!("`{s}`: the lower bound is above the upper one"));
        }
        Ok(Self { min, max })
    }
}

impl std::fmt::Display for QuantitySpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.min == self.max {
            write!(f, "{}", self.min)
        } else {
            write!(f, "{}-{}", self.min, self.max)
        }
    }
}

// `queue MODE`: the waiting room's benchmarks (queue.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum QueueMode {
    Joins,
    Positions,
    Onsale,
}

#[derive(Debug, Clone, clap::Args)]
pub struct QueueArgs {
    #[arg(value_enum)]
    pub mode: QueueMode,
    /// The server's base URL (plain http, loopback).
    #[arg(long, default_value = "http://127.0.0.1:3000")]
    pub url: String,
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: Option<String>,
    /// Connections (each a virtual client; in `onsale` they serve all the
    /// joiners' polls in turn).
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// Seconds of measurement (`joins`; `positions`: each of the two).
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Entries in the queue (`positions`, `onsale`).
    #[arg(long, default_value_t = 20_000)]
    pub joiners: usize,
    /// Tickets on sale (`onsale`), one per buyer.
    #[arg(long, default_value_t = 1_000)]
    pub tickets: i32,
    /// The room's admission rate (`onsale`).
    #[arg(long, default_value_t = 3_000)]
    pub admit_per_minute: i32,
    /// Give up on the on-sale after this many seconds from the opening.
    #[arg(long, default_value_t = 180.0)]
    pub limit: f64,
    /// Tokio worker threads of the generator.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_are_a_number_or_a_range() {
        assert_eq!("3".parse(), Ok(QuantitySpec { min: 3, max: 3 }));
        assert_eq!("1-4".parse(), Ok(QuantitySpec { min: 1, max: 4 }));
        assert!("0".parse::<QuantitySpec>().is_err());
        assert!("4-1".parse::<QuantitySpec>().is_err());
        assert!("x".parse::<QuantitySpec>().is_err());
    }
}
