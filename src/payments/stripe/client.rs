//! The calls the sale makes: create and read a PaymentIntent, refund it,
//! and read a webhook.

use std::{num::NonZeroU32, sync::Arc};

use reqwest::Method;
use tracing::{Span, field::Empty};
use url::Url;
use uuid::Uuid;

use super::{
    IntentStatus, PaymentIntent, Refund, SignatureError, StripeConfig, StripeError, WebhookEvent,
    WebhookKey,
    transport::{self, Transport},
    wire::{List, WireIntent},
};

/// The Stripe client; clones share one connection pool.
#[derive(Clone)]
pub struct Stripe {
    inner: Arc<Inner>,
}

struct Inner {
    transport: Transport,
    webhook_key: WebhookKey,
    api_base: Url,
    send_description: bool,
}

impl Stripe {
    pub fn new(config: StripeConfig) -> Result<Self, StripeError> {
        let StripeConfig {
            secret_key,
            webhook_secret,
            api_base,
            requests_per_second,
            send_description,
        } = config;
        if secret_key.is_empty() || secret_key.chars().any(char::is_whitespace) {
            return Err(StripeError::Config(
                "the secret key is empty or has white space",
            ));
        }
        if webhook_secret.is_empty() {
            return Err(StripeError::Config("the webhook secret is empty"));
        }
        if !matches!(api_base.scheme(), "https" | "http") || api_base.cannot_be_a_base() {
            return Err(StripeError::Config("the API base is not an http(s) URL"));
        }
        let per_second = NonZeroU32::new(requests_per_second)
            .ok_or(StripeError::Config("requests per second must be above 0"))?;
        let webhook_key = WebhookKey::new(&webhook_secret)
            .map_err(|_| StripeError::Config("the webhook secret is not a usable HMAC key"))?;
        Ok(Self {
            inner: Arc::new(Inner {
                transport: Transport {
                    http: Transport::client()?,
                    secret_key,
                    pacer: transport::pacer(per_second),
                },
                webhook_key,
                api_base,
                send_description,
            }),
        })
    }

    /// `{api_base}/v1/{segments...}`, each segment percent-encoded: an id
    /// from a request cannot reach another path.
    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.inner.api_base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().push("v1").extend(segments);
        }
        url
    }

    /// Creates the PaymentIntent an order is paid through. The idempotency
    /// key is the order's: a retry, or a second call for the same order
    /// within Stripe's 24 hours, returns the first intent. (Stripe answers
    /// 400 if the second call's amount or currency differ.)
    #[tracing::instrument(
        name = "stripe.create_payment_intent",
        skip_all,
        fields(%order_id, amount = amount_minor, currency, intent_id = Empty),
    )]
    pub async fn create_payment_intent(
        &self,
        order_id: Uuid,
        amount_minor: i64,
        currency: &str,
        description: &str,
    ) -> Result<PaymentIntent, StripeError> {
        let mut form = vec![
            ("amount", amount_minor.to_string()),
            ("currency", currency.to_ascii_lowercase()),
            ("metadata[order_id]", order_id.to_string()),
            ("payment_method_types[]", "card".to_owned()),
        ];
        if self.inner.send_description && !description.is_empty() {
            form.push(("description", description.to_owned()));
        }
        let key = format!("stampede-pi-{order_id}");
        let intent: WireIntent = self
            .inner
            .transport
            .call(
                Method::POST,
                self.url(&["payment_intents"]),
                Some(&form),
                Some(&key),
            )
            .await?;
        let intent = PaymentIntent::from(intent);
        Span::current().record("intent_id", intent.id.as_str());
        tracing::info!(status = %intent.status, "payment intent created");
        Ok(intent)
    }

    #[tracing::instrument(name = "stripe.retrieve_payment_intent", skip(self))]
    pub async fn retrieve_payment_intent(
        &self,
        intent_id: &str,
    ) -> Result<PaymentIntent, StripeError> {
        let intent: WireIntent = self
            .inner
            .transport
            .call(
                Method::GET,
                self.url(&["payment_intents", intent_id]),
                None,
                None,
            )
            .await?;
        Ok(intent.into())
    }

    /// Closes an intent whose order ended unpaid, so that a pay page left
    /// open cannot pay it later. An intent that has meanwhile succeeded (or
    /// cannot be cancelled any more) is returned as it is: the caller
    /// settles what succeeded.
    #[tracing::instrument(name = "stripe.cancel_payment_intent", skip(self))]
    pub async fn cancel_payment_intent(
        &self,
        intent_id: &str,
    ) -> Result<PaymentIntent, StripeError> {
        let intent = self.retrieve_payment_intent(intent_id).await?;
        if matches!(
            intent.status,
            IntentStatus::Succeeded | IntentStatus::Canceled | IntentStatus::Processing
        ) {
            return Ok(intent);
        }
        let cancelled: WireIntent = self
            .inner
            .transport
            .call(
                Method::POST,
                self.url(&["payment_intents", intent_id, "cancel"]),
                Some(&[]),
                None,
            )
            .await?;
        Ok(cancelled.into())
    }

    /// Refunds the whole payment of `intent_id`, at most once: a refund the
    /// intent already has is returned instead of a new one. The idempotency
    /// key alone would not do: localstripe ignores it, and Stripe forgets it
    /// after 24 hours, while a crash between Stripe's answer and our commit
    /// leads to a retry whenever the process comes back.
    ///
    /// A failed or canceled earlier refund does not count; a new attempt
    /// within 24 hours of it gets it back from Stripe (same key), though.
    #[tracing::instrument(name = "stripe.refund", skip(self), fields(refund_id = Empty))]
    pub async fn refund(&self, intent_id: &str, order_id: Uuid) -> Result<Refund, StripeError> {
        let intent = self.retrieve_payment_intent(intent_id).await?;
        if intent.order_id.is_some_and(|owner| owner != order_id) {
            return Err(StripeError::WrongOrder {
                intent_id: intent.id,
                order_id,
            });
        }
        // Also keeps localstripe from answering 500 to the list below, for
        // an intent that never had a charge.
        if intent.status != IntentStatus::Succeeded {
            return Err(StripeError::NotRefundable {
                intent_id: intent.id,
                status: intent.status,
            });
        }
        if let Some(refund) = self.live_refund(intent_id).await? {
            Span::current().record("refund_id", refund.id.as_str());
            tracing::info!(status = %refund.status, "already refunded; not refunding again");
            return Ok(refund);
        }
        let form = [
            ("payment_intent", intent_id.to_owned()),
            ("metadata[order_id]", order_id.to_string()),
        ];
        let key = format!("stampede-refund-{order_id}");
        let refund: Refund = self
            .inner
            .transport
            .call(
                Method::POST,
                self.url(&["refunds"]),
                Some(&form),
                Some(&key),
            )
            .await?;
        Span::current().record("refund_id", refund.id.as_str());
        tracing::info!(status = %refund.status, amount = refund.amount, "refunded");
        Ok(refund)
    }

    /// The intent's refund that is not failed or canceled, if any.
    async fn live_refund(&self, intent_id: &str) -> Result<Option<Refund>, StripeError> {
        let mut url = self.url(&["refunds"]);
        url.query_pairs_mut()
            .append_pair("payment_intent", intent_id)
            .append_pair("limit", "100");
        let refunds: List<Refund> = self
            .inner
            .transport
            .call(Method::GET, url, None, None)
            .await?;
        Ok(refunds.data.into_iter().find(Refund::is_live))
    }

    /// Verifies a webhook: `header` is the `Stripe-Signature` value, `now`
    /// unix seconds. The body is parsed only once its signature verified.
    pub fn verify_webhook(
        &self,
        header: Option<&str>,
        body: &[u8],
        now: i64,
    ) -> Result<WebhookEvent, SignatureError> {
        self.inner.webhook_key.verify(header, body, now)?;
        WebhookEvent::from_json(body).map_err(SignatureError::Payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(api_base: &str) -> StripeConfig {
        StripeConfig {
            secret_key: "sk_test_x".into(),
            webhook_secret: "whsec_x".into(),
            api_base: Url::parse(api_base).unwrap(),
            requests_per_second: 25,
            send_description: true,
        }
    }

    #[test]
    fn urls_keep_the_base_path_and_encode_ids() {
        let stripe = Stripe::new(config("http://127.0.0.1:1/")).unwrap();
        assert_eq!(
            stripe.url(&["payment_intents", "pi_1"]).as_str(),
            "http://127.0.0.1:1/v1/payment_intents/pi_1"
        );
        assert_eq!(
            stripe.url(&["payment_intents", "../refunds?x"]).path(),
            "/v1/payment_intents/..%2Frefunds%3Fx"
        );
        let proxied = Stripe::new(config("http://127.0.0.1:1/stripe")).unwrap();
        assert_eq!(
            proxied.url(&["refunds"]).as_str(),
            "http://127.0.0.1:1/stripe/v1/refunds"
        );
    }

    #[test]
    fn refuses_unusable_configuration() {
        let mut bad = config("http://127.0.0.1:1");
        bad.requests_per_second = 0;
        assert!(matches!(Stripe::new(bad), Err(StripeError::Config(_))));
        let mut bad = config("http://127.0.0.1:1");
        bad.secret_key = String::new();
        assert!(matches!(Stripe::new(bad), Err(StripeError::Config(_))));
        assert!(matches!(
            Stripe::new(config("ftp://127.0.0.1:1")),
            Err(StripeError::Config(_))
        ));
        assert!(!format!("{:?}", config("http://127.0.0.1:1")).contains("sk_test_x"));
    }

    #[tokio::test]
    async fn verify_webhook_parses_only_signed_bodies() {
        let stripe = Stripe::new(config("http://127.0.0.1:1")).unwrap();
        let key = WebhookKey::new("whsec_x").unwrap();
        let body = br#"{"id":"evt_1","type":"charge.succeeded","created":10,
            "data":{"object":{"object":"charge"}}}"#;
        let header = key.signature_header(10, body);
        let event = stripe.verify_webhook(Some(&header), body, 10).unwrap();
        assert_eq!((event.id.as_str(), event.created), ("evt_1", 10));

        let garbage = b"not json";
        let header = key.signature_header(10, garbage);
        assert!(matches!(
            stripe.verify_webhook(Some(&header), garbage, 10),
            Err(SignatureError::Payload(_))
        ));
    }
}
