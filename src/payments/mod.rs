//! Paid tickets through Stripe (issue 35). An order of a ticket with a
//! price, in an event whose money Stripe takes, is held for the event's
//! time to pay; the buyer pays on our pay page with Stripe.js
//! ([`intent`]); Stripe's signed webhook, or the [`reconcile`]r asking
//! Stripe, confirms it exactly once ([`settle`]); an order that ends keeps
//! no money: the [`refunds`] are made at Stripe through a queue written in
//! the transaction that ends it. Every Stripe call is paced and retried
//! ([`stripe`]) and none runs inside a transaction.

pub mod intent;
pub mod reconcile;
pub mod refunds;
pub mod settle;
pub mod state;
pub mod stripe;

pub use reconcile::first_look;

use std::time::Duration;

use sqlx::PgPool;
use time::OffsetDateTime;

/// Stripe, connected.
#[derive(Clone)]
pub struct Payments {
    pub stripe: stripe::Stripe,
    /// Given to Stripe.js on the pay page.
    pub publishable_key: String,
    /// Where the pay page loads Stripe.js from.
    pub js_url: url::Url,
    /// Stripe's API, which Stripe.js talks to too (for the page's policy).
    pub api_base: url::Url,
    /// Between the reconciler's and the refunder's rounds.
    pub every: Duration,
    /// The reconciler's first look at a payment, after its intent is made.
    pub first_look: Duration,
}

/// The reconciler and the refunder, one round of each every `every`, on
/// every instance (their claims share the work).
pub fn spawn(db: PgPool, payments: Payments) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(payments.every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let now = OffsetDateTime::now_utc();
            if let Err(err) = reconcile::round(&db, &payments, now).await {
                tracing::warn!(%err, "a reconciler round failed");
            }
            if let Err(err) = reconcile::close_round(&db, &payments, now).await {
                tracing::warn!(%err, "a round closing unpaid intents failed");
            }
            loop {
                match refunds::round(&db, &payments).await {
                    Ok(claimed) if claimed as i64 == refunds::ROUND => continue,
                    Ok(_) => break,
                    Err(err) => {
                        tracing::warn!(%err, "a refunder round failed");
                        break;
                    }
                }
            }
        }
    })
}
