//! The webhook API's bodies (`/api/v1/organizer/webhooks...`): requests
//! refuse unknown fields; responses carry RFC 3339 times; the secret
//! appears only in the answer that created (or rotated) it.

use serde::{Deserialize, Serialize};
use time::{OffsetDateTime, format_description::well_known::Rfc3339};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::{
    db::webhooks::{Attempt, Delivery, Endpoint},
    domain::{DeliveryId, InvalidField, WebhookId},
    webhooks::endpoints::{EndpointInput, EndpointPatch},
};

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

pub const DEFAULT_WEBHOOKS_LIMIT: i64 = 20;
pub const MAX_WEBHOOKS_LIMIT: i64 = 100;

/// `POST /api/v1/organizer/webhooks`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWebhook {
    /// An https URL (plain http and private addresses only when the
    /// server allows them).
    pub url: String,
    /// Of `order.created`, `order.confirmed`, `order.expired`, `order.cancelled`, `event.cancelled`,
    /// `ticket_type.sold_out`, `ticket_type.available_again`, `order.paid`, `order.refunded`.
    #[schema(example = json!(["order.created"]))]
    pub event_types: Vec<String>,
    #[serde(default)]
    pub description: Option<String>,
}

impl CreateWebhook {
    pub fn into_input(self) -> EndpointInput {
        EndpointInput {
            url: self.url,
            description: self.description.unwrap_or_default(),
            event_types: self.event_types,
        }
    }
}

/// `PATCH /api/v1/organizer/webhooks/{id}`: absent fields stay.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateWebhook {
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub event_types: Option<Vec<String>>,
    #[serde(default)]
    pub enabled: Option<bool>,
}

impl UpdateWebhook {
    pub fn into_patch(self) -> EndpointPatch {
        EndpointPatch {
            url: self.url,
            description: self.description,
            event_types: self.event_types,
            enabled: self.enabled,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookBody {
    pub id: WebhookId,
    pub url: String,
    pub description: String,
    pub event_types: Vec<String>,
    pub enabled: bool,
    pub disabled_reason: Option<String>,
    #[schema(format = DateTime)]
    pub disabled_at: Option<String>,
    #[schema(format = DateTime)]
    pub last_success_at: Option<String>,
    #[schema(format = DateTime)]
    pub created_at: String,
    /// Only in the answer that created or rotated it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

impl From<Endpoint> for WebhookBody {
    fn from(e: Endpoint) -> Self {
        Self {
            id: e.id,
            url: e.url,
            description: e.description,
            event_types: e.event_types,
            enabled: e.enabled,
            disabled_reason: e.disabled_reason,
            disabled_at: e.disabled_at.map(rfc3339),
            last_success_at: e.last_success_at.map(rfc3339),
            created_at: rfc3339(e.created_at),
            secret: None,
        }
    }
}

impl WebhookBody {
    pub fn with_secret(mut self, secret: String) -> Self {
        self.secret = Some(secret);
        self
    }
}

/// A page of endpoints; `next` is the `after` of the next page.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookList {
    pub webhooks: Vec<WebhookBody>,
    pub next: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AttemptBody {
    #[schema(format = DateTime)]
    pub attempted_at: String,
    pub status_code: Option<i32>,
    pub error: Option<String>,
    pub latency_ms: i32,
    pub response_excerpt: String,
    pub retry_in_ms: Option<i64>,
}

impl From<Attempt> for AttemptBody {
    fn from(a: Attempt) -> Self {
        Self {
            attempted_at: rfc3339(a.attempted_at),
            status_code: a.status_code,
            error: a.error,
            latency_ms: a.latency_ms,
            response_excerpt: a.response_excerpt,
            retry_in_ms: a.retry_in_ms,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryBody {
    pub id: DeliveryId,
    /// The `webhook-id` header: the outbox message's id.
    pub webhook_id: Uuid,
    #[serde(rename = "type")]
    pub kind: String,
    /// `pending`, `succeeded` or `failed`.
    pub status: String,
    pub attempts: i32,
    #[schema(format = DateTime)]
    pub next_attempt_at: Option<String>,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub completed_at: Option<String>,
    pub log: Vec<AttemptBody>,
}

impl From<Delivery> for DeliveryBody {
    fn from(d: Delivery) -> Self {
        let pending = d.status == "pending";
        Self {
            id: d.id,
            webhook_id: d.message_id,
            kind: d.kind,
            status: d.status,
            attempts: d.attempts,
            next_attempt_at: d.next_attempt_at.filter(|_| pending).map(rfc3339),
            created_at: rfc3339(d.created_at),
            completed_at: d.completed_at.map(rfc3339),
            log: d.log.into_iter().map(Into::into).collect(),
        }
    }
}

/// A page of deliveries, newest first; `next` is the `after` of the next.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryList {
    pub deliveries: Vec<DeliveryBody>,
    pub next: Option<String>,
}

/// `POST .../redeliver` → 202.
#[derive(Debug, Serialize, ToSchema)]
pub struct RedeliverBody {
    pub id: DeliveryId,
    pub webhook_id: Uuid,
    pub status: &'static str,
}

/// `?limit=&after=` of the webhook lists; other parameters are refused.
#[derive(Debug, Clone, Copy)]
pub struct PageQuery {
    pub limit: i64,
    pub after: Option<i64>,
}

impl PageQuery {
    pub fn parse(raw: Option<&str>) -> Result<Self, InvalidField> {
        let mut page = Self {
            limit: DEFAULT_WEBHOOKS_LIMIT,
            after: None,
        };
        for (key, value) in form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
            match key.as_ref() {
                "limit" => {
                    page.limit = value
                        .parse()
                        .ok()
                        .filter(|n| (1..=MAX_WEBHOOKS_LIMIT).contains(n))
                        .ok_or_else(|| {
                            InvalidField::new("limit", "The limit is a number from 1 to 100.")
                        })?;
                }
                "after" => {
                    page.after = Some(value.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                        InvalidField::new("after", "Use the `next` of the previous page.")
                    })?);
                }
                other => {
                    return Err(InvalidField::new(
                        other,
                        "Unknown parameter; use limit and after.",
                    ));
                }
            }
        }
        Ok(page)
    }
}
