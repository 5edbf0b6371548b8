//! Every page and API route over real HTTP: the real router on a loopback
//! port, a client that does not follow redirects, and the tables checked
//! directly after each request. A module per area.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod access;
mod accounts;
mod api;
mod buy_form;
mod buyer_limits;
mod buyer_pages;
mod checkin;
mod clock;
mod csrf;
mod dashboard;
mod event_cancel;
mod listing;
mod openapi;
mod organizer_api;
mod organizer_bounds;
mod organizer_pages;
mod pause;
mod plain_text;
mod settings;
mod site;
mod unconfirmed_holds;
