//! Queries that are not the sale: events, ticket types, order pages.

pub mod dashboard;
pub mod events;
pub mod orders;
