//! Paid tickets through Stripe (issue 35), against localstripe: the client
//! alone, and the app's money paths end to end.

mod client;
mod flow;
mod migration;
mod publish;
mod refunds;
mod shop;
