use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use stampede::{
    AppState,
    config::{self, Cli, Command},
    telemetry,
    web::Limits,
};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    telemetry::init(cli.log_format);
    let options = config::connect_options(cli.database_url.as_deref())?;
    let pool = config::connect_pool(options, &cli.serve).await?;
    config::migrate(&pool).await?;
    match cli.command.unwrap_or(Command::Serve) {
        Command::Migrate => {
            tracing::info!("migrations applied");
            Ok(())
        }
        Command::Serve => serve(pool, &cli.serve).await,
    }
}

async fn serve(pool: sqlx::PgPool, args: &config::ServeArgs) -> anyhow::Result<()> {
    let limits = Limits {
        max_in_flight: args.max_in_flight,
        request_timeout: Duration::from_secs(args.request_timeout_secs),
    };
    let app = stampede::app(AppState::new(pool.clone()).with_limits(limits));
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    tracing::info!(address = %listener.local_addr()?, "listening");
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown_signal())
    .await?;
    // In-flight requests have finished; let their transactions settle.
    pool.close().await;
    tracing::info!("stopped");
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::error!(%err, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(err) => {
                tracing::error!(%err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!("shutting down: finishing in-flight requests");
}
