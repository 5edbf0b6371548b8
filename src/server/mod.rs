//! Serving the app: the accept loop (`accept`), per-address connection
//! caps, the client behind a trusted balancer (`proxy`), deadlines on every
//! connection, and graceful shutdown.
//!
//! `axum::serve` gives hyper no timer, so slow heads and idle keep-alive
//! connections would live for ever; this serves through hyper's HTTP/1
//! builder with a timer, a small read buffer and our own watchdog (see
//! [`connection`]).

mod accept;
mod connection;
mod descriptors;
mod proxy;
mod reserve;

use std::{sync::Arc, time::Duration};

use anyhow::Context as _;
use sqlx::PgPool;
use tokio::net::TcpListener;
use tower_sessions::session_store::ExpiredDeletion as _;

use crate::{
    clock::SystemClock,
    config::ServeArgs,
    domain::{ConfirmKey, Quotas, RetrySchedule},
    mail::{self, MailSettings},
    outbox::{self, RelaySettings},
    sale::{self, EngineSettings, GateRedis, GateSettings},
    waiting_room::{self, RoomKey, Rooms},
    web::{self, AppState, Limits, purchase_limits::PurchaseRates},
    webhooks::{self, WebhookSettings},
};
pub use accept::serve;
use connection::Deadlines;
pub use proxy::ClientAddressing;

/// Largest request head (request line and headers) a connection buffers;
/// beyond it the answer is 431. Browsers send a few KiB.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// Connection-level limits (request-level ones are in [`Limits`]), and
/// how the client's address is learnt.
#[derive(Debug, Clone)]
pub struct ConnLimits {
    /// Open connections per client address (IPv6: per /64); 0 = no cap.
    pub max_connections_per_ip: usize,
    /// Open connections in all, past which only health checks are served
    /// (from a small reserve); 0 = the open-file limit less a reserve.
    pub max_connections: usize,
    /// A request head must arrive within this of its first byte.
    pub header_read_timeout: Duration,
    /// A connection with no request open is closed after this long quiet.
    pub idle_timeout: Duration,
    /// The client behind a trusted balancer (the PROXY protocol,
    /// `X-Forwarded-For`).
    pub clients: ClientAddressing,
    /// How long a handler may take (the app's request timeout): with a
    /// request open, nothing may move for this plus the header timeout.
    pub request_timeout: Duration,
}

impl Default for ConnLimits {
    fn default() -> Self {
        Self {
            max_connections_per_ip: 256,
            max_connections: 0,
            header_read_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(30),
            clients: ClientAddressing::default(),
            request_timeout: Limits::default().request_timeout,
        }
    }
}

impl ConnLimits {
    fn deadlines(&self) -> Deadlines {
        Deadlines {
            header_read: self.header_read_timeout,
            idle: self.idle_timeout,
            stalled: self.request_timeout + self.header_read_timeout,
        }
    }
}

/// `stampede serve`: the app on `args.listen` until SIGTERM or Ctrl-C.
pub async fn run(pool: PgPool, args: &ServeArgs) -> anyhow::Result<()> {
    descriptors::raise_limit();
    web::install_metrics();
    let request_timeout = Duration::from_secs(args.limits.request_timeout_secs);
    let limits = Limits {
        max_in_flight: args.limits.max_in_flight,
        max_purchases_in_flight: args.limits.max_purchases_in_flight,
        max_in_flight_per_ip: args.limits.max_in_flight_per_ip,
        body_read_timeout: Duration::from_secs(args.limits.body_read_timeout_secs),
        request_timeout,
        purchase_rates: PurchaseRates {
            per_ip_burst: args.rates.purchase_burst_per_ip,
            per_email_burst: args.rates.purchase_burst_per_email,
            period: Duration::from_millis(args.rates.purchase_period_ms),
        },
        api_requests_per_minute: args.rates.api_requests_per_minute,
        code_failures_per_ip: args.rates.presale_code_failures_per_ip,
        ..Limits::default()
    };
    if args.limits.proxy_protocol && args.limits.trusted_proxies.is_empty() {
        anyhow::bail!(
            "--proxy-protocol needs --trusted-proxies: any peer could otherwise name any client"
        );
    }
    let conn_limits = ConnLimits {
        max_connections_per_ip: args.limits.max_connections_per_ip,
        clients: ClientAddressing {
            proxy_protocol: args.limits.proxy_protocol,
            trusted: args.limits.trusted_proxies.clone().into(),
        },
        max_connections: args.limits.max_connections,
        header_read_timeout: Duration::from_secs(args.limits.header_read_timeout_secs),
        idle_timeout: Duration::from_secs(args.limits.idle_timeout_secs),
        request_timeout,
    };
    let quotas = Quotas {
        published_events: args.quotas.quota_published_events,
        ticket_types_per_event: args.quotas.quota_ticket_types_per_event,
        total_capacity: args.quotas.quota_total_capacity,
        presale_codes_per_event: args.quotas.quota_presale_codes_per_event,
        stripe_connected: false,
    };
    let batches = EngineSettings {
        max_batch: args.sale.batch_max as usize,
        queue_capacity: args.sale.batch_queue as usize,
        holds: args.sale.hold_rules(),
        ..EngineSettings::default()
    };
    let mut state = AppState::new(pool.clone()).with_sales(args.sale.sale_strategy, batches);
    if args.sale.sale_strategy.needs_redis() {
        state = state.with_redis(&args.sale.redis_url)?;
    }
    if args.sale.redis_gate {
        let settings = GateSettings {
            timeout: Duration::from_millis(args.sale.redis_gate_timeout_ms),
            reconcile_every: Duration::from_secs(args.sale.redis_gate_reconcile_secs),
            prefix: args.sale.redis_gate_prefix.clone(),
            build_ahead: (args.sale.redis_gate_ahead_secs > 0)
                .then(|| Duration::from_secs(args.sale.redis_gate_ahead_secs)),
            ..GateSettings::default()
        };
        let redis = if args.sale.redis_cluster_nodes.is_empty() {
            GateRedis::Server(args.sale.redis_url.clone())
        } else {
            GateRedis::Cluster(args.sale.redis_cluster_nodes.clone())
        };
        tracing::info!(%redis, "Redis gate on");
        state = state.with_gate(redis, settings)?;
    }
    let room_key = match &args.waiting_room_key {
        Some(raw) => RoomKey::from_config(raw).map_err(anyhow::Error::msg)?,
        None => {
            tracing::warn!(
                "no --waiting-room-key: this process signs waiting-room passes with a key of its own; \
                 with more than one instance, set the same key on every one"
            );
            RoomKey::random()
        }
    };
    let confirm_key = match &args.confirm_key {
        Some(raw) => ConfirmKey::from_config(raw).map_err(anyhow::Error::msg)?,
        None => {
            tracing::warn!(
                "no --confirm-key: this process derives confirmation links, and the links of \
                 ticket mails, with a key of its own: they stop working when it restarts, and \
                 another instance refuses them. Set the same key on every instance"
            );
            ConfirmKey::random()
        }
    };
    let public_url = args
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{}", args.listen));
    let mail_settings = MailSettings::new(args.smtp_url.clone(), &args.mail_from, &public_url)
        .map_err(anyhow::Error::msg)?;
    let mailer = mail::spawn(pool.clone(), confirm_key.clone(), mail_settings)
        .map_err(anyhow::Error::msg)?;
    let state = state
        .with_confirm_key(confirm_key)
        .with_rooms(
            Rooms::new(room_key, args.waiting_room_entries_per_client)
                .with_proof_bits(args.waiting_room_proof_bits),
        )
        .with_limits(limits)
        .with_secure_cookies(args.secure_cookies)
        .with_quotas(quotas)
        .with_site(&public_url, args.time_zone.clone())
        .with_list_cache_ttl(Duration::from_millis(args.list_cache_ms));
    let payments = args.payments.connect()?;
    let state = match payments.clone() {
        Some(payments) => state.with_payments(payments),
        None => state,
    };
    let relay = match &args.outbox.amqp_url {
        Some(url) => {
            let settings = relay_settings(url, args)?;
            tracing::info!(exchange = %settings.exchange, "outbox relay on");
            Some(outbox::spawn(pool.clone(), settings))
        }
        None => {
            tracing::info!("outbox relay off (no --amqp-url): the outbox records, nothing is sent");
            None
        }
    };
    let state = state.with_webhooks_allow_private(args.webhooks.webhooks_allow_private);
    let webhook_settings = WebhookSettings {
        allow_private: args.webhooks.webhooks_allow_private,
        schedule: RetrySchedule {
            base: Duration::from_millis(args.webhooks.webhook_retry_base_ms),
        },
        ..WebhookSettings::default()
    };
    let webhooks =
        webhooks::spawn(pool.clone(), webhook_settings).context("building the webhook client")?;
    let draining = state.draining.clone();
    let app = crate::app(state);
    let payer = payments.map(|payments| crate::payments::spawn(pool.clone(), payments));
    // Every instance runs one; one at a time admits (see waiting_room::tick).
    let admitter = waiting_room::spawn_admitter(pool.clone());
    // Every instance sweeps expired holds; SKIP LOCKED shares the work.
    let holds = sale::spawn_sweeper(
        pool.clone(),
        Arc::new(SystemClock),
        Duration::from_millis(args.hold_sweep_ms),
    );
    // Expired organizer sessions are deleted hourly in the background.
    let sweeper = tokio::spawn(
        web::session_store(pool.clone()).continuously_delete_expired(Duration::from_secs(3600)),
    );
    let metrics = serve_metrics(&pool, args.metrics_listen).await?;
    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    tracing::info!(address = %listener.local_addr()?, "listening");
    let drain = Duration::from_secs(args.limits.drain_secs);
    serve(listener, app, conn_limits, drained(drain, draining)).await;
    if let Some(metrics) = metrics {
        metrics.abort();
    }
    // In-flight requests have finished; let their transactions settle.
    sweeper.abort();
    admitter.abort();
    holds.abort();
    // A mail cut short is sent again by the next round (see crate::mail).
    mailer.abort();
    // A round cut short leaves its rows unsent: the next relay sends them.
    if let Some(relay) = relay {
        relay.abort();
    }
    // An attempt cut short is retried when its lease ends.
    webhooks.abort();
    // A refund cut short is looked for at Stripe before it is made again.
    if let Some(payer) = payer {
        payer.abort();
    }
    pool.close().await;
    tracing::info!("stopped");
    Ok(())
}

/// `/metrics` on a listener of its own when `--metrics-listen` is given
/// (never on the site's listener).
async fn serve_metrics(
    pool: &PgPool,
    addr: Option<std::net::SocketAddr>,
) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
    let Some(addr) = addr else {
        tracing::info!("metrics off (no --metrics-listen)");
        return Ok(None);
    };
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr} (--metrics-listen)"))?;
    tracing::info!(address = %listener.local_addr()?, "metrics listening");
    let app = web::metrics_app(pool.clone());
    Ok(Some(tokio::spawn(serve(
        listener,
        app,
        ConnLimits::default(),
        std::future::pending(),
    ))))
}

/// The relay's settings from the flags; a bad URL is a clear error at start.
fn relay_settings(url: &str, args: &ServeArgs) -> anyhow::Result<RelaySettings> {
    let mut settings = RelaySettings::new(url).map_err(anyhow::Error::msg)?;
    settings.exchange = args.outbox.amqp_exchange.clone();
    settings.batch = i64::from(args.outbox.outbox_batch);
    settings.poll = Duration::from_millis(args.outbox.outbox_poll_ms);
    settings.retention = Duration::from_secs(args.outbox.outbox_retention_hours * 3600);
    Ok(settings)
}

/// SIGTERM or Ctrl-C, then `drain` with `/readyz` answering 503, so that
/// the balancer's checks take this instance out before it stops accepting:
/// no request is sent to it after.
async fn drained(drain: Duration, draining: Arc<std::sync::atomic::AtomicBool>) {
    shutdown_signal().await;
    if !drain.is_zero() {
        draining.store(true, std::sync::atomic::Ordering::Relaxed);
        tracing::info!(
            ?drain,
            "draining: /readyz answers 503 before the listener closes"
        );
        tokio::time::sleep(drain).await;
    }
}

/// SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
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
}
