//! Stampede: ticketing for the on-sale rush.
//!
//! - [`domain`]: input parsed into types (email, quantity, money, events).
//! - [`sale`]: the purchase path, one transaction; read it first.
//! - [`db`]: every other query.
//! - [`web`]: axum handlers, maud views, the JSON API; [`app`] builds the router.

pub mod auth;
pub mod clock;
pub mod config;
pub mod db;
pub mod domain;
pub mod error;
pub mod sale;
pub mod telemetry;
pub mod web;

pub use web::{AppState, app};
