//! Settings from flags and environment, and the database connection.
//! The command line is here; `serve`'s flags are grouped per area.

mod database;
mod limits;
mod outbox;
mod payments;
mod sale;
mod serve;

pub use database::{
    DatabaseArgs, connect_options, connect_pool, ensure_database, migrate, open as open_database,
};
pub use limits::{LimitArgs, QuotaArgs, RateArgs};
pub use outbox::{OutboxArgs, WebhookArgs};
pub use payments::PaymentArgs;
pub use sale::SaleArgs;
pub use serve::ServeArgs;

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
