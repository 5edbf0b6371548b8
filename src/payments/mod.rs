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

use std::time::Duration;

use sqlx::PgPool;
use time::OffsetDateTime;

use crate::config::PaymentArgs;

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

impl Payments {
    /// Stripe as the flags say, or `None` without a secret key. A secret
    /// key without the webhook's secret or the publishable key is refused:
    /// payments would be taken and never confirmed.
    pub fn from_args(args: &PaymentArgs) -> anyhow::Result<Option<Self>> {
        let Some(secret_key) = args.stripe_secret_key.clone() else {
            tracing::info!(
                "payments off (no --stripe-secret-key): events whose tickets have a price paid through Stripe cannot be published"
            );
            return Ok(None);
        };
        let webhook_secret = args.stripe_webhook_secret.clone().ok_or_else(|| {
            anyhow::anyhow!("--stripe-secret-key needs --stripe-webhook-secret (the webhook endpoint's signing secret)")
        })?;
        let publishable_key = args.stripe_publishable_key.clone().ok_or_else(|| {
            anyhow::anyhow!(
                "--stripe-secret-key needs --stripe-publishable-key (for Stripe.js on the pay page)"
            )
        })?;
        let stripe = stripe::Stripe::new(stripe::StripeConfig {
            secret_key,
            webhook_secret,
            api_base: args.stripe_api_base.clone(),
            requests_per_second: args.stripe_requests_per_second,
            send_description: !args.stripe_no_description,
        })?;
        let every = Duration::from_secs(args.stripe_reconcile_secs);
        tracing::info!(api = %args.stripe_api_base, "payments on (Stripe)");
        Ok(Some(Self {
            stripe,
            publishable_key,
            js_url: args.stripe_js_url.clone(),
            api_base: args.stripe_api_base.clone(),
            every,
            first_look: reconcile::first_look(every),
        }))
    }
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
