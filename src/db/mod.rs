//! Every query but the sale transaction (which is `sale/`): events, ticket
//! types, order pages, the dashboard, organizer accounts and tokens.

mod codec;
pub mod dashboard;
pub mod events;
pub mod orders;
pub mod organizers;
