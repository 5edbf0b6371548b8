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
        // The answer itself is not echoed: it would map the internal DNS.
        if refused.is_some() {
            return Err(InvalidField::new(
                "url",
                "The URL's host is not a public address; deliveries go to public addresses only.",
            ));
        }
    }
    Ok(url.as_str().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The machine's own name, which /etc/hosts maps to a loopback address
    /// on Debian-like systems (127.0.1.1, or 127.0.0.1 on this machine kind).
    fn own_name() -> String {
        let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        name.trim().to_owned()
    }

    #[tokio::test]
    async fn a_name_resolving_inward_is_refused_without_echoing_the_answer() {
        let name = own_name();
        let answers: Vec<_> = tokio::net::lookup_host((name.as_str(), 443))
            .await
            .unwrap_or_else(|e| panic!("this test needs {name} to resolve (/etc/hosts): {e}"))
            .collect();
        assert!(
            answers.iter().any(|a| !is_public(a.ip())),
            "this test needs {name} to resolve to a loopback address (/etc/hosts), got {answers:?}"
        );
        for raw in [format!("https://{name}/in"), format!("https://{name}./in")] {
            let err = parse_url(&raw, false).await.unwrap_err();
            let message = err.to_string();
            assert!(message.contains("not a public address"), "{raw}: {message}");
            for answer in &answers {
                let ip = answer.ip().to_string();
                assert!(!message.contains(&ip), "{raw}: {message} echoes {ip}");
            }
        }
    }
}
