//! The database: the pool's flags, connecting (creating the database if
//! need be) and migrating.

use std::{str::FromStr, time::Duration};

use anyhow::Context;
use sqlx::{
    ConnectOptions, Connection, Executor as _, PgPool,
    postgres::{PgConnectOptions, PgConnection, PgPoolOptions},
};

/// The connection pool.
#[derive(Debug, Clone, clap::Args)]
pub struct DatabaseArgs {
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

    /// The database URL is a pooler in transaction mode (PgBouncer's
    /// `pool_mode = transaction`, with `server_reset_query = DEALLOCATE ALL`
    /// and `server_reset_query_always = 1`). Each use of a pooled
    /// connection then runs inside one transaction, so that a statement's
    /// prepare and its execution reach the same server connection; see
    /// docs/operating.md. Needs `--database-direct-url`.
    #[arg(long, env = "STAMPEDE_DB_TRANSACTION_POOLER", global = true)]
    pub db_transaction_pooler: bool,

    /// A direct Postgres URL, not through the pooler, for what needs a
    /// session of its own: creating the database, migrations (a session
    /// lock) and the LISTEN of returned stock. Defaults to the database URL.
    #[arg(long, env = "STAMPEDE_DATABASE_DIRECT_URL", global = true)]
    pub database_direct_url: Option<String>,
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

/// The database at `database_url`, created and migrated if need be (through
/// the direct URL), and the pool the app uses.
pub async fn open(database_url: Option<&str>, args: &DatabaseArgs) -> anyhow::Result<PgPool> {
    let options = connect_options(database_url)?;
    let direct = match args.database_direct_url.as_deref() {
        Some(url) => connect_options(Some(url))?,
        None if args.db_transaction_pooler => {
            anyhow::bail!("--db-transaction-pooler needs --database-direct-url")
        }
        None => options.clone(),
    };
    ensure_database(&direct).await?;
    let mut session = PgConnection::connect_with(&direct)
        .await
        .context("connecting to Postgres directly")?;
    migrate(&mut session).await?;
    session.close().await?;
    if args.database_direct_url.is_some() {
        crate::db::session::use_direct(direct);
    }
    connect_pool(options, args).await
}

pub async fn connect_pool(
    options: PgConnectOptions,
    args: &DatabaseArgs,
) -> anyhow::Result<PgPool> {
    anyhow::ensure!(
        args.db_min_connections <= args.db_max_connections,
        "--db-min-connections ({}) must not be more than --db-max-connections ({})",
        args.db_min_connections,
        args.db_max_connections,
    );
    let pool = PgPoolOptions::new()
        .max_connections(args.db_max_connections)
        .acquire_timeout(Duration::from_millis(args.db_acquire_timeout_ms));
    if args.db_transaction_pooler {
        // Lazily, then one statement through the pool: `connect_with` hands
        // its first connection back without `after_release`, which would
        // leave it in its BEGIN.
        let pool =
            pooled_in_transactions(pool).connect_lazy_with(options.statement_cache_capacity(0));
        sqlx::query("SELECT 1")
            .execute(&pool)
            .await
            .context("connecting to Postgres through the pooler")?;
        Ok(pool)
    } else {
        pool.min_connections(args.db_min_connections)
            .connect_with(options)
            .await
            .context("connecting to Postgres")
    }
}

/// Behind a pooler in transaction mode a server connection is ours only
/// inside a transaction, and sqlx sends a statement's prepare and its
/// execution as two messages, each ending in a Sync, between which the
/// pooler may hand us another server. So every use of a pooled connection
/// is one transaction: BEGIN when it is handed out, COMMIT when it comes
/// back. An explicit transaction inside is the same transaction (its BEGIN
/// and its COMMIT or ROLLBACK end it early, which Postgres allows with a
/// warning). That COMMIT comes after the statement's caller has gone on,
/// so every write of Stampede is in an explicit transaction of its own
/// (tests/it/house checks), and the pool's COMMIT only ends reads.
/// Statements are not cached (a cached one lives on a server connection we
/// may not get again); the pooler deallocates them when it takes the server
/// back. No connections are kept idle (sqlx opens those without handing
/// them out, so they would sit in a BEGIN holding a server): the pooler
/// keeps the server connections warm instead. Nor are they closed for age
/// (sqlx would close them without the COMMIT): the pooler's
/// `server_lifetime` renews the servers.
fn pooled_in_transactions(pool: PgPoolOptions) -> PgPoolOptions {
    pool.min_connections(0)
        .max_lifetime(None)
        // The BEGIN below tests the connection: no ping before it.
        .test_before_acquire(false)
        .after_connect(|conn, _| Box::pin(async move { conn.execute("BEGIN").await.map(drop) }))
        .before_acquire(|conn, _| {
            Box::pin(async move { conn.execute("BEGIN").await.map(|_| true) })
        })
        .after_release(|conn, _| {
            Box::pin(async move { conn.execute("COMMIT").await.map(|_| true) })
        })
}

pub async fn migrate(session: &mut PgConnection) -> anyhow::Result<()> {
    sqlx::migrate!("./migrations")
        .run(session)
        .await
        .context("applying migrations")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::config::Cli;

    fn database_args(flags: &[&str]) -> DatabaseArgs {
        Cli::parse_from(std::iter::once("stampede").chain(flags.iter().copied()))
            .serve
            .database
    }

    #[sqlx::test]
    async fn the_pool_opens_its_minimum_at_once_and_refuses_one_over_the_maximum(pool: PgPool) {
        let options = (*pool.connect_options()).clone();
        let args = database_args(&["--db-min-connections", "3", "--db-max-connections", "5"]);
        let kept = connect_pool(options.clone(), &args).await.unwrap();
        assert!(kept.size() >= 3, "{} connections open", kept.size());
        kept.close().await;

        let args = database_args(&["--db-min-connections", "6", "--db-max-connections", "5"]);
        let err = connect_pool(options, &args).await.unwrap_err().to_string();
        assert!(err.contains("--db-min-connections (6)"), "{err}");
    }
}
