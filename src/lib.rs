//! Stampede: ticketing for the on-sale rush.
//!
//! Modules depend on each other one way:
//! `domain ← error ← db ← {auth, sale, outbox, webhooks} ← web`.
//!
//! - [`domain`]: types and rules without I/O (input, ids, the sale window).
//! - [`error`]: the one error enum and its status/code/field tables.
//! - [`sale`]: the purchase path, one transaction; read it first.
//! - [`db`]: every other query.
//! - [`auth`]: passwords and API tokens.
//! - [`web`]: axum handlers, maud views, the JSON API; [`app`] builds the router.
//! - [`waiting_room`]: the per-event queue, its shuffle, admission and passes.
//! - [`outbox`]: the relay that publishes the outbox to RabbitMQ.
//! - [`webhooks`]: the worker that delivers the outbox to organizers' endpoints.
//! - [`tickets`]: a confirmed order's documents: QR codes, the PDF, the calendar file.
//! - [`server`]: the accept loop and per-connection limits that serve it.
//! - [`metric_handles`]: metric handles kept at hand for the hot paths.

pub mod auth;
pub mod checkin;
pub mod clock;
pub mod config;
pub mod db;
pub mod domain;
pub mod error;
pub mod mail;
pub mod metric_handles;
pub mod outbox;
pub mod payments;
pub mod sale;
pub mod server;
pub mod telemetry;
pub mod tickets;
pub mod waiting_room;
pub mod web;
pub mod webhooks;

pub use web::{AppState, app};
