use tracing_subscriber::{EnvFilter, fmt, prelude::*};

use crate::config::LogFormat;

/// Logs to stderr; RUST_LOG overrides the default filter. Behind a pooler in
/// transaction mode (`pooled_in_transactions`) every explicit transaction
/// makes Postgres warn that one is already in progress and, at the pool's
/// COMMIT, that none is: expected there, so its notices below errors are
/// not logged, whatever RUST_LOG says unless it names them.
pub fn init(format: LogFormat, transaction_pooler: bool) {
    let mut filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("stampede=info,tower_http=info,sqlx=warn"));
    let notices_named =
        std::env::var("RUST_LOG").is_ok_and(|rust_log| rust_log.contains("sqlx::postgres::notice"));
    if transaction_pooler
        && !notices_named
        && let Ok(quiet) = "sqlx::postgres::notice=error".parse()
    {
        filter = filter.add_directive(quiet);
    }
    let registry = tracing_subscriber::registry().with(filter);
    match format {
        LogFormat::Human => registry
            .with(fmt::layer().with_writer(std::io::stderr))
            .init(),
        LogFormat::Json => registry
            .with(
                fmt::layer()
                    .json()
                    .with_current_span(true)
                    .with_writer(std::io::stderr),
            )
            .init(),
    }
}
