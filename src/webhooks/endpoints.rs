//! Registering and changing endpoints, shared by the settings page and the
//! API: input parsed by `domain`, the host resolved once to refuse a name
//! that points at a private address (deliveries check again, every time),
//! and the secret minted here and returned once.

use std::time::Duration;

use url::Host;

use super::signature::new_secret;
use crate::{
    db::webhooks::{self as store, Endpoint, EndpointChange, NewEndpoint},
    domain::{
        InvalidField, OrganizerId, WebhookId, WebhookUrl, is_public, parse_event_types,
        parse_webhook_description,
    },
    error::AppError,
};

/// What a form or a request body says, before parsing.
#[derive(Debug, Clone, Default)]
pub struct EndpointInput {
    pub url: String,
    pub description: String,
    pub event_types: Vec<String>,
}

/// A new endpoint and its secret, which is shown this once.
pub async fn create(
    db: &sqlx::PgPool,
    organizer_id: OrganizerId,
    input: &EndpointInput,
    allow_private: bool,
) -> Result<(Endpoint, String), AppError> {
    let new = NewEndpoint {
        url: parse_url(&input.url, allow_private).await?,
        description: parse_webhook_description(&input.description)?,
        event_types: parse_event_types(&input.event_types)?,
    };
    let secret = new_secret();
    let endpoint = store::create(db, organizer_id, &new, &secret).await?;
    Ok((endpoint, secret))
}

/// A change as a form or a request body says it; `None` leaves a field alone.
#[derive(Debug, Clone, Default)]
pub struct EndpointPatch {
    pub url: Option<String>,
    pub description: Option<String>,
    pub event_types: Option<Vec<String>>,
    pub enabled: Option<bool>,
}

/// Change the fields given.
pub async fn update(
    db: &sqlx::PgPool,
    organizer_id: OrganizerId,
    id: WebhookId,
    patch: &EndpointPatch,
    allow_private: bool,
) -> Result<Endpoint, AppError> {
    // Another organizer's endpoint is not found before its input is judged.
    store::find_owned(db, organizer_id, id).await?;
    let change = EndpointChange {
        url: match &patch.url {
            Some(url) => Some(parse_url(url, allow_private).await?),
            None => None,
        },
        description: patch
            .description
            .as_deref()
            .map(parse_webhook_description)
            .transpose()?,
        event_types: patch
            .event_types
            .as_deref()
            .map(parse_event_types)
            .transpose()?,
        enabled: patch.enabled,
    };
    store::update(db, organizer_id, id, &change).await
}

/// A new secret for the endpoint, returned once; the old one stops at once.
pub async fn rotate_secret(
    db: &sqlx::PgPool,
    organizer_id: OrganizerId,
    id: WebhookId,
) -> Result<String, AppError> {
    let secret = new_secret();
    store::rotate_secret(db, organizer_id, id, &secret).await?;
    Ok(secret)
}

/// The URL's form, then its host's addresses: a name that resolves to a
/// private address is refused now (a name that does not resolve yet is
/// accepted; each delivery resolves and checks again).
async fn parse_url(raw: &str, allow_private: bool) -> Result<String, InvalidField> {
    let url = WebhookUrl::parse(raw, allow_private)?;
    if allow_private {
        return Ok(url.as_str().to_owned());
    }
    if let Some(Host::Domain(name)) = url.url().host() {
        let lookup = tokio::net::lookup_host((name, 443));
        let refused = match tokio::time::timeout(Duration::from_secs(3), lookup).await {
            Ok(Ok(mut addrs)) => addrs.find(|addr| !is_public(addr.ip())),
            _ => None,
        };
        if let Some(addr) = refused {
            return Err(InvalidField::new(
                "url",
                format!(
                    "{name} resolves to {}, a loopback, private or link-local address; deliveries go to public addresses only.",
                    addr.ip()
                ),
            ));
        }
    }
    Ok(url.as_str().to_owned())
}
