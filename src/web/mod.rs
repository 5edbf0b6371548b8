//! HTTP: the router, thin handlers, views and the JSON API.

mod account;
pub mod admission;
mod api;
mod api_rate_limit;
mod assets;
mod auth;
mod code_guard;
pub mod csrf;
mod dashboard;
mod door;
pub mod error;
pub mod event_cache;
mod export;
mod extract;
mod layers;
pub mod list_cache;
mod organizer;
mod pages;
mod pay;
pub mod per_client;
mod presale;
pub mod purchase_limits;
mod queue;
mod router;
mod state;
mod telemetry;
mod tickets;
pub mod views;
mod waitlist;
mod webhooks;

pub use error::ApiError;
pub use layers::LIMITER_PRUNE_EVERY;
pub use router::app;
pub use state::{AppState, DEFAULT_LIST_CACHE_TTL, Limits, session_store};

/// Largest request body accepted anywhere; forms and JSON are small.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Install the process's metrics recorder. Call it before anything that
/// counts: the sale's listeners and the gate's warm-up start counting when
/// the sale is made, before the app is; counts made before it are lost.
pub fn install_metrics() {
    telemetry::recorder();
}

pub use export::ROWS_PER_PAGE as EXPORT_ROWS_PER_PAGE;
pub use telemetry::metrics_app;
