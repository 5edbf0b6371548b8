use std::{io::BufRead, time::Duration};

use anyhow::Context;
use clap::Parser;
use stampede::{
    AppState, auth,
    config::{self, Cli, Command, OrganizerCommand},
    domain::Email,
    telemetry,
    web::{self, Limits},
};
use tower_sessions::session_store::ExpiredDeletion;

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
        Command::Organizer {
            command:
                OrganizerCommand::Add {
                    email,
                    password_stdin,
                    token_name,
                },
        } => add_organizer(&pool, &email, password_stdin, &token_name).await,
    }
}

async fn serve(pool: sqlx::PgPool, args: &config::ServeArgs) -> anyhow::Result<()> {
    let limits = Limits {
        max_in_flight: args.max_in_flight,
        request_timeout: Duration::from_secs(args.request_timeout_secs),
        ..Limits::default()
    };
    let state = AppState::new(pool.clone())
        .with_limits(limits)
        .with_secure_cookies(args.secure_cookies);
    let app = stampede::app(state);
    // Expired organizer sessions are deleted hourly in the background.
    let sweeper = tokio::spawn(
        web::session_store(pool.clone()).continuously_delete_expired(Duration::from_secs(3600)),
    );
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
    sweeper.abort();
    pool.close().await;
    tracing::info!("stopped");
    Ok(())
}

/// `stampede organizer add EMAIL`: only the token goes to stdout, so that
/// scripts can capture it.
async fn add_organizer(
    pool: &sqlx::PgPool,
    email: &str,
    password_stdin: bool,
    token_name: &str,
) -> anyhow::Result<()> {
    let email = Email::parse(email).map_err(|message| anyhow::anyhow!("email: {message}"))?;
    let password = if password_stdin {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .context("reading the password from stdin")?;
        line.trim_end_matches(['\r', '\n']).to_owned()
    } else {
        rpassword::prompt_password(format!("Password for {email}: "))
            .context("reading the password")?
    };
    let password =
        auth::NewPassword::parse(&password).map_err(|err| anyhow::anyhow!("{}", err.message))?;
    let organizer = auth::sign_up(pool, &email, password)
        .await
        .map_err(|err| anyhow::anyhow!("{err}"))?;
    let token = auth::create_token(pool, organizer.id, token_name)
        .await
        .map_err(|err| anyhow::anyhow!("{err}"))?;
    eprintln!("Created organizer {email}. API token (shown once):");
    println!("{token}");
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
