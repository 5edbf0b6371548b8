//! Stripe: PaymentIntents for orders, their refunds, and verified webhooks.
//!
//! One [`Stripe`] per process, cloned where needed. Every HTTP attempt of the
//! process waits on one rate limiter (Stripe allows about 100 requests a
//! second per account, shared by every instance); failed attempts (429, 5xx,
//! transport) are retried with jittered back-off, and calls that create
//! something carry an `Idempotency-Key` derived from the order, the same on
//! every retry, so Stripe creates it once.
//!
//! Tested against localstripe (`tests/it/payments/client.rs`), which differs
//! from Stripe in ways this module works around: it ignores
//! `Idempotency-Key` (hence [`Stripe::refund`] looks before it creates) and
//! refuses a PaymentIntent's `description` (hence
//! [`StripeConfig::send_description`]).

mod client;
mod signature;
mod transport;
mod wire;

pub use client::Stripe;
pub use signature::{SIGNATURE_TOLERANCE_SECS, SignatureError, WebhookKey};
pub use wire::{IntentStatus, PaymentIntent, Refund, WebhookEvent};

use std::fmt;

/// Stripe's API, where [`StripeConfig::api_base`] points unless testing.
pub const DEFAULT_API_BASE: &str = "https://api.stripe.com";
/// A quarter of what Stripe allows a live account: room for the dashboard
/// and other integrations on the same account.
pub const DEFAULT_REQUESTS_PER_SECOND: u32 = 25;

pub struct StripeConfig {
    /// `sk_...` (or a restricted `rk_...`), sent as the basic-auth user.
    pub secret_key: String,
    /// `whsec_...`, the webhook endpoint's signing secret; its bytes as
    /// written are the HMAC key.
    pub webhook_secret: String,
    /// [`DEFAULT_API_BASE`]; tests point it at localstripe.
    pub api_base: url::Url,
    /// Pacing of every call of this process (burst of as many); the first
    /// [`Stripe::new`] of the process sets it.
    pub requests_per_second: u32,
    /// Send the order's description with a new PaymentIntent. Stripe shows
    /// it in the dashboard; localstripe answers 400 to it, so tests set
    /// `false`.
    pub send_description: bool,
}

/// Leaves both secrets out.
impl fmt::Debug for StripeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StripeConfig")
            .field("secret_key", &"<redacted>")
            .field("webhook_secret", &"<redacted>")
            .field("api_base", &self.api_base.as_str())
            .field("requests_per_second", &self.requests_per_second)
            .field("send_description", &self.send_description)
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StripeError {
    /// [`Stripe::new`] refused the configuration.
    #[error("Stripe configuration: {0}")]
    Config(&'static str),
    /// The request could not even be built; nothing was sent.
    #[error("cannot send a request to Stripe: {0}")]
    Http(#[source] reqwest::Error),
    /// Stripe refused the request (a 4xx other than 429): retrying the same
    /// request would be refused again.
    #[error("Stripe refused the request ({status}): {message}")]
    Api { status: u16, message: String },
    /// Every attempt failed on 429, 5xx or transport; for a create, whether
    /// Stripe created it is unknown, and a later call with the same order
    /// (the same idempotency key) finds out without creating it twice.
    #[error("Stripe failed {attempts} attempts, the last with: {last}")]
    Exhausted { attempts: u32, last: String },
    /// A 2xx whose body is not what Stripe documents.
    #[error("cannot read Stripe's answer: {0}")]
    Decode(#[source] serde_json::Error),
    /// Only a succeeded payment can be refunded.
    #[error("payment intent {intent_id} is {status}: there is no payment to refund")]
    NotRefundable {
        intent_id: String,
        status: IntentStatus,
    },
    /// The intent belongs to another order than the one being refunded.
    #[error("payment intent {intent_id} is not order {order_id}'s")]
    WrongOrder {
        intent_id: String,
        order_id: uuid::Uuid,
    },
}
