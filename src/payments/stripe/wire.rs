//! The objects Stripe sends, as we keep them: only the fields the sale
//! needs. Stripe adds fields without notice and localstripe sends objects
//! where Stripe sends ids (`latest_charge`), so everything else is ignored.

use std::{collections::HashMap, fmt};

use serde::Deserialize;
use uuid::Uuid;

/// A PaymentIntent: one attempt to collect one order's amount.
#[derive(Clone, PartialEq, Eq)]
pub struct PaymentIntent {
    pub id: String,
    /// What the buyer's browser needs to confirm the payment; a secret,
    /// hence the hand-written `Debug` that leaves it out.
    pub client_secret: Option<String>,
    pub status: IntentStatus,
    /// Minor units, as Stripe counts them (JPY has none, KWD has three).
    pub amount: i64,
    /// Upper-case ISO 4217; Stripe speaks lower case.
    pub currency: String,
    /// `metadata[order_id]`, when it is there and a UUID.
    pub order_id: Option<Uuid>,
}

impl fmt::Debug for PaymentIntent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PaymentIntent")
            .field("id", &self.id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("status", &self.status)
            .field("amount", &self.amount)
            .field("currency", &self.currency)
            .field("order_id", &self.order_id)
            .finish()
    }
}

/// A PaymentIntent's status. Stripe documents new statuses as they come,
/// so an unknown one is kept, not refused.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "String")]
pub enum IntentStatus {
    RequiresPaymentMethod,
    RequiresConfirmation,
    RequiresAction,
    Processing,
    RequiresCapture,
    Canceled,
    Succeeded,
    Other(String),
}

impl IntentStatus {
    /// Stripe's spelling.
    pub fn as_str(&self) -> &str {
        match self {
            Self::RequiresPaymentMethod => "requires_payment_method",
            Self::RequiresConfirmation => "requires_confirmation",
            Self::RequiresAction => "requires_action",
            Self::Processing => "processing",
            Self::RequiresCapture => "requires_capture",
            Self::Canceled => "canceled",
            Self::Succeeded => "succeeded",
            Self::Other(other) => other,
        }
    }
}

impl From<String> for IntentStatus {
    fn from(value: String) -> Self {
        match value.as_str() {
            "requires_payment_method" => Self::RequiresPaymentMethod,
            "requires_confirmation" => Self::RequiresConfirmation,
            "requires_action" => Self::RequiresAction,
            "processing" => Self::Processing,
            "requires_capture" => Self::RequiresCapture,
            "canceled" => Self::Canceled,
            "succeeded" => Self::Succeeded,
            _ => Self::Other(value),
        }
    }
}

impl fmt::Display for IntentStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refund of a payment.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Refund {
    pub id: String,
    /// `pending`, `requires_action`, `succeeded`, `failed` or `canceled`.
    pub status: String,
    pub amount: i64,
}

impl Refund {
    /// Whether this refund has given, or is giving, the money back: a
    /// failed or canceled one does not stop a new attempt.
    pub(super) fn is_live(&self) -> bool {
        !matches!(self.status.as_str(), "failed" | "canceled")
    }
}

/// A webhook event whose signature has been verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookEvent {
    pub id: String,
    /// Stripe's `type`, e.g. `payment_intent.succeeded`.
    pub kind: String,
    pub created: i64,
    /// `data.object`, when it is a PaymentIntent.
    pub payment_intent: Option<PaymentIntent>,
}

/// A PaymentIntent as Stripe sends it.
#[derive(Deserialize)]
pub(super) struct WireIntent {
    id: String,
    #[serde(default)]
    client_secret: Option<String>,
    status: IntentStatus,
    amount: i64,
    currency: String,
    #[serde(default)]
    metadata: HashMap<String, String>,
}

impl From<WireIntent> for PaymentIntent {
    fn from(wire: WireIntent) -> Self {
        Self {
            order_id: wire
                .metadata
                .get("order_id")
                .and_then(|id| Uuid::parse_str(id).ok()),
            id: wire.id,
            client_secret: wire.client_secret,
            status: wire.status,
            amount: wire.amount,
            currency: wire.currency.to_ascii_uppercase(),
        }
    }
}

/// One page of a list endpoint.
#[derive(Deserialize)]
pub(super) struct List<T> {
    pub data: Vec<T>,
}

/// Stripe's error body: `{"error": {"message": ..., "type": ...}}`.
#[derive(Deserialize)]
pub(super) struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Deserialize)]
pub(super) struct ErrorDetail {
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
}

#[derive(Deserialize)]
struct WireEvent {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    created: i64,
    data: EventData,
}

#[derive(Deserialize)]
struct EventData {
    object: serde_json::Value,
}

impl WebhookEvent {
    /// Reads an event's JSON (only ever after its signature verified).
    pub(super) fn from_json(body: &[u8]) -> Result<Self, serde_json::Error> {
        let event: WireEvent = serde_json::from_slice(body)?;
        let is_intent =
            event.data.object.get("object").and_then(|o| o.as_str()) == Some("payment_intent");
        let payment_intent = if is_intent {
            Some(serde_json::from_value::<WireIntent>(event.data.object)?.into())
        } else {
            None
        };
        Ok(Self {
            id: event.id,
            kind: event.kind,
            created: event.created,
            payment_intent,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(json: &str) -> IntentStatus {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn statuses_parse_from_stripes_spelling() {
        for known in [
            IntentStatus::RequiresPaymentMethod,
            IntentStatus::RequiresConfirmation,
            IntentStatus::RequiresAction,
            IntentStatus::Processing,
            IntentStatus::RequiresCapture,
            IntentStatus::Canceled,
            IntentStatus::Succeeded,
        ] {
            assert_eq!(status(&format!("\"{}\"", known.as_str())), known);
        }
        assert_eq!(status("\"succeeded\""), IntentStatus::Succeeded);
    }

    #[test]
    fn an_unknown_status_is_kept() {
        assert_eq!(
            status("\"requires_source\""),
            IntentStatus::Other("requires_source".into())
        );
        assert_eq!(status("\"Succeeded\"").as_str(), "Succeeded");
    }

    #[test]
    fn intents_read_order_id_and_upper_case_currency_and_hide_the_secret() {
        let order = Uuid::new_v4();
        let json = format!(
            r#"{{"id":"pi_1","object":"payment_intent","client_secret":"pi_1_secret_x",
                "status":"requires_payment_method","amount":25500,"currency":"kwd",
                "latest_charge":{{"id":"ch_1"}},"metadata":{{"order_id":"{order}"}}}}"#
        );
        let intent: PaymentIntent = serde_json::from_str::<WireIntent>(&json).unwrap().into();
        assert_eq!(intent.currency, "KWD");
        assert_eq!(intent.amount, 25500);
        assert_eq!(intent.order_id, Some(order));
        assert!(!format!("{intent:?}").contains("pi_1_secret_x"));
    }

    #[test]
    fn events_carry_their_intent_only_when_it_is_one() {
        let intent = br#"{"id":"evt_1","type":"payment_intent.succeeded","created":5,
            "data":{"object":{"object":"payment_intent","id":"pi_1","status":"succeeded",
            "amount":2500,"currency":"jpy","metadata":{}}}}"#;
        let event = WebhookEvent::from_json(intent).unwrap();
        assert_eq!(event.kind, "payment_intent.succeeded");
        let pi = event.payment_intent.unwrap();
        assert_eq!((pi.status, pi.order_id), (IntentStatus::Succeeded, None));

        let other = br#"{"id":"evt_2","type":"charge.refunded","created":5,
            "data":{"object":{"object":"charge","id":"ch_1"}}}"#;
        assert_eq!(WebhookEvent::from_json(other).unwrap().payment_intent, None);
    }
}
