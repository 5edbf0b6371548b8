//! Webhook endpoints, their deliveries and attempts (migrations/0012): the
//! organizer's CRUD, each scoped to its owner (another organizer's endpoint
//! is "not found"), and the worker's queries (`webhooks/`): fan-out of the
//! outbox, claiming due deliveries, recording attempts.

//!
//! The rows are here; the organizer's queries in endpoints.rs, the
//! worker's in worker.rs.

mod endpoints;
mod worker;

use time::OffsetDateTime;
use uuid::Uuid;

pub use endpoints::{
    create, delete, deliveries, find_owned, list, redeliver, rotate_secret, update,
};
pub use worker::{
    AttemptRecord, Due, Next, claim_due, depth, fan_out, record_attempt, succeeded_since,
};

use crate::domain::{DeliveryId, WebhookId};

/// An endpoint as its owner sees it; the secret is never read into this.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub id: WebhookId,
    pub seq: i64,
    pub url: String,
    pub description: String,
    pub event_types: Vec<String>,
    pub enabled: bool,
    pub disabled_reason: Option<String>,
    pub disabled_at: Option<OffsetDateTime>,
    pub last_success_at: Option<OffsetDateTime>,
    pub created_at: OffsetDateTime,
}

/// What a new endpoint is made of (parsed by `domain`).
#[derive(Debug, Clone)]
pub struct NewEndpoint {
    pub url: String,
    pub description: String,
    pub event_types: Vec<String>,
}

/// A change of an endpoint; `None` leaves the field alone.
#[derive(Debug, Clone, Default)]
pub struct EndpointChange {
    pub url: Option<String>,
    pub description: Option<String>,
    pub event_types: Option<Vec<String>>,
    pub enabled: Option<bool>,
}

/// One message to one endpoint, with its attempts (newest delivery first).
#[derive(Debug, Clone)]
pub struct Delivery {
    pub id: DeliveryId,
    pub seq: i64,
    pub message_id: Uuid,
    pub kind: String,
    pub status: String,
    pub attempts: i32,
    pub next_attempt_at: Option<OffsetDateTime>,
    pub created_at: OffsetDateTime,
    pub completed_at: Option<OffsetDateTime>,
    pub log: Vec<Attempt>,
}

#[derive(Debug, Clone)]
pub struct Attempt {
    pub delivery_id: Uuid,
    pub attempted_at: OffsetDateTime,
    pub status_code: Option<i32>,
    pub error: Option<String>,
    pub latency_ms: i32,
    pub response_excerpt: String,
    pub retry_in_ms: Option<i64>,
}
