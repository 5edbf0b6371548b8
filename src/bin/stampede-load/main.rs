//! `stampede-load`: plays a flash sale against a running Stampede over
//! HTTP and checks the outcome from Postgres.
//!
//! - `run SCENARIO`: set up an organizer, an event and its ticket types with
//!   plain SQL, play the scenario with N virtual buyers (closed loop) or at a
//!   fixed arrival rate (open loop), then count committed orders from the
//!   database and check the invariants.
//! - `table FILE…`: turn `--json` reports into the markdown table of
//!   BENCHMARKS.md.
//!
//! It talks to the server with a bare hyper HTTP/1 client: every virtual
//! buyer owns one kept-alive connection, as in wrk, so the generator's own
//! CPU per request stays small on a machine it shares with the server.

mod buyer;
mod cli;
mod cpu;
mod driver;
mod http;
mod queue;
mod report;
mod scenario;
mod setup;
mod table;
mod verify;

use std::{sync::Arc, time::Duration};

use anyhow::Context;
use clap::Parser;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use cli::{Cli, Command, RunArgs};

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(args.threads.max(1))
                .enable_all()
                .build()
                .context("starting the tokio runtime")?;
            let report = runtime.block_on(run(&args))?;
            if args.json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                print!("{}", report.render_text());
            }
            if report.invariants.as_ref().is_some_and(|i| !i.ok) {
                anyhow::bail!("the invariant check failed (see the report)");
            }
            Ok(())
        }
        Command::Table(args) => table::print(&args),
        Command::Queue(args) => queue::main(&args),
    }
}

async fn run(args: &RunArgs) -> anyhow::Result<report::Report> {
    let plan = scenario::Plan::resolve(args)?;
    let targets = args
        .urls
        .iter()
        .map(|url| http::Target::parse(url))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if args.wait_ready > 0.0 {
        for target in &targets {
            http::wait_ready(target, Duration::from_secs_f64(args.wait_ready)).await?;
        }
    }

    let db = if plan.needs_database() {
        let pool = PgPoolOptions::new()
            .max_connections(2)
            .connect_with(connect_options(args.database_url.as_deref())?)
            .await
            .context("connecting to Postgres (--database-url)")?;
        Some(pool)
    } else {
        None
    };
    let sale = match &db {
        Some(db) => setup::create(db, &plan).await?,
        None => setup::Sale::default(),
    };
    let pg_before = match (&db, args.pg_stats) {
        (Some(db), true) => Some(verify::pg_transactions(db).await?),
        _ => None,
    };

    let cpu_before = cpu::CpuSample::take(&args.server_pids);
    let played = driver::play(Arc::new(plan.clone()), &sale, targets, args).await?;
    let cpu = cpu::CpuSample::take(&args.server_pids).since(&cpu_before);

    let invariants = match &db {
        Some(db) => Some(verify::check(db, &sale, &played.tally).await?),
        None => None,
    };
    let pg_transactions = match (&db, pg_before) {
        (Some(db), Some(before)) => Some(verify::pg_transactions_since(db, before).await?),
        _ => None,
    };
    Ok(report::Report::new(
        args,
        &plan,
        &sale,
        played,
        invariants,
        cpu,
        pg_transactions,
    ))
}

/// A URL, or as the server does without one: like psql (PG* variables, the
/// local socket, the OS user) to the database `stampede` or PGDATABASE.
fn connect_options(url: Option<&str>) -> anyhow::Result<PgConnectOptions> {
    Ok(match url {
        Some(url) => url
            .parse()
            .context("--database-url is not a Postgres URL")?,
        None if std::env::var_os("PGDATABASE").is_some() => PgConnectOptions::new(),
        None => PgConnectOptions::new().database("stampede"),
    })
}
