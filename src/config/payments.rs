//! Paid tickets through Stripe, as flags. Without a secret key the app
//! runs without payments: an event whose tickets have a price paid
//! through Stripe cannot be published.

use std::time::Duration;

use crate::payments::{
    Payments, first_look,
    stripe::{Stripe, StripeConfig},
};

#[derive(Debug, Clone, clap::Args)]
pub struct PaymentArgs {
    /// Stripe's secret API key (`sk_live_…`, `sk_test_…`). Unset: no
    /// payments.
    #[arg(long, env = "STRIPE_SECRET_KEY", hide_env_values = true, global = true)]
    pub stripe_secret_key: Option<String>,

    /// Stripe's publishable key (`pk_…`), which the pay page gives
    /// Stripe.js.
    #[arg(long, env = "STRIPE_PUBLISHABLE_KEY", global = true)]
    pub stripe_publishable_key: Option<String>,

    /// The signing secret of the Stripe webhook endpoint (`whsec_…`) that
    /// sends `payment_intent.*` events to `/payments/stripe/webhook`.
    #[arg(
        long,
        env = "STRIPE_WEBHOOK_SECRET",
        hide_env_values = true,
        global = true
    )]
    pub stripe_webhook_secret: Option<String>,

    /// Stripe's API (the tests point it at a local fake).
    #[arg(
        long,
        env = "STRIPE_API_BASE",
        default_value = "https://api.stripe.com",
        global = true
    )]
    pub stripe_api_base: url::Url,

    /// Where the pay page loads Stripe.js from.
    #[arg(
        long,
        env = "STRIPE_JS_URL",
        default_value = "https://js.stripe.com/v3/",
        global = true
    )]
    pub stripe_js_url: url::Url,

    /// Calls to Stripe per second from this instance at most (Stripe allows
    /// about 100 per account; share them among the instances).
    #[arg(
        long,
        env = "STRIPE_REQUESTS_PER_SECOND",
        default_value_t = 25,
        value_parser = clap::value_parser!(u32).range(1..=1000),
        global = true
    )]
    pub stripe_requests_per_second: u32,

    /// Leave the order's description out of new PaymentIntents (Stripe
    /// shows it in its dashboard; some Stripe stand-ins refuse it).
    #[arg(long, env = "STRIPE_NO_DESCRIPTION", global = true)]
    pub stripe_no_description: bool,

    /// Seconds between the reconciler's rounds, which ask Stripe about
    /// payments whose webhook has not come.
    #[arg(
        long,
        env = "STRIPE_RECONCILE_SECS",
        default_value_t = 15,
        value_parser = clap::value_parser!(u64).range(1..=3600),
        global = true
    )]
    pub stripe_reconcile_secs: u64,
}

impl PaymentArgs {
    /// Stripe as the flags say, or `None` without a secret key. A secret
    /// key without the webhook's secret or the publishable key is refused:
    /// payments would be taken and never confirmed.
    pub fn connect(&self) -> anyhow::Result<Option<Payments>> {
        let args = self;
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
        let stripe = Stripe::new(StripeConfig {
            secret_key,
            webhook_secret,
            api_base: args.stripe_api_base.clone(),
            requests_per_second: args.stripe_requests_per_second,
            send_description: !args.stripe_no_description,
        })?;
        let every = Duration::from_secs(args.stripe_reconcile_secs);
        tracing::info!(api = %args.stripe_api_base, "payments on (Stripe)");
        Ok(Some(Payments {
            stripe,
            publishable_key,
            js_url: args.stripe_js_url.clone(),
            api_base: args.stripe_api_base.clone(),
            every,
            first_look: first_look(every),
        }))
    }
}
