use std::io::BufRead;

use anyhow::Context;
use clap::Parser;
use stampede::{
    auth,
    config::{self, Cli, Command, OrganizerCommand},
    domain::Email,
    server, telemetry,
};

// Returns freed memory to the system promptly: each password hash takes a
// 19 MiB buffer, which glibc would keep in the arena of whichever blocking
// thread ran it, so resident memory grew with every log-in (see docs/architecture.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    telemetry::init(cli.log_format, cli.serve.database.db_transaction_pooler);
    let pool = config::open_database(cli.database_url.as_deref(), &cli.serve.database).await?;
    match cli.command.unwrap_or(Command::Serve) {
        Command::Migrate => {
            tracing::info!("migrations applied");
            Ok(())
        }
        Command::Serve => server::run(pool, &cli.serve).await,
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
    let organizer = auth::sign_up(pool, &email, password, auth::AddressProof::Operator)
        .await
        .map_err(|err| anyhow::anyhow!("{err}"))?;
    let token = auth::create_token(pool, organizer.id, token_name)
        .await
        .map_err(|err| anyhow::anyhow!("{err}"))?;
    eprintln!("Created organizer {email}. API token (shown once):");
    println!("{token}");
    Ok(())
}
