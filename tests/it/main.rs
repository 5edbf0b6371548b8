//! The integration tests, one binary (each `tests/*.rs` file would link the
//! whole crate again): a module per theme. They start the real app or drive
//! the sale directly against real Postgres, Redis and RabbitMQ, and check the
//! invariants from the tables. `./scripts/test` runs them with cargo-nextest,
//! a process per test, so a test that installs a global (a tracing
//! subscriber, a metrics recorder) has its process to itself.
//! The browser test and the isolation specs are binaries of their own.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod gate;
mod http;

mod behind_a_balancer;
mod burst;
mod checkin_concurrency;
mod docs;
mod gate_ahead;
mod gate_buyer_gone;
mod gate_cluster;
mod gate_logs;
mod hold_the_door;
mod holds;
mod house;
mod load_generator;
mod mail;
mod openapi_fuzz;
mod outbox;
mod overload;
mod payments;
mod presale;
mod sale_concurrency;
mod sale_guards;
mod sale_window;
mod schema_keys;
mod strategies;
mod through_pgbouncer;
mod ticket_mail;
mod ticket_mail_rush;
mod waiting_room;
mod waitlist;
mod webhooks;
