//! The database: the pool's flags, connecting (creating the database if
//! need be) and migrating.

use std::{str::FromStr, time::Duration};

use anyhow::Context;
use sqlx::{
    ConnectOptions, Connection, PgPool,
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
