//! The HTTP client deliveries go out through, safe against server-side
//! request forgery: a receiver's host name is resolved by our own resolver,
//! which drops every address that is not public (`domain::is_public`), and
//! the connection goes to an address it kept, so a DNS answer cannot be
//! swapped between the check and the connect (rebinding). IP literals skip
//! resolvers, so they are checked before sending. No proxies, no redirects
//! followed, short timeouts, and at most `EXCERPT_BYTES` of the answer read.

use std::{
    error::Error as StdError,
    net::{IpAddr, SocketAddr},
    sync::Arc,
    time::{Duration, Instant},
};

use reqwest::{
    Client, StatusCode,
    dns::{Addrs, Name, Resolve, Resolving},
    redirect::Policy,
};
use url::{Host, Url};

use crate::domain::is_public;

/// How much of a receiver's answer is read and kept for the log.
pub const EXCERPT_BYTES: usize = 4096;

#[derive(Debug, thiserror::Error)]
#[error("refused: {0} is not a public address")]
struct Refused(String);

/// Resolves with the system resolver and keeps only public addresses
/// (unless private ones are allowed).
#[derive(Debug)]
struct PublicOnly {
    allow_private: bool,
}

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let kept: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|addr| allow_private || is_public(addr.ip()))
                .collect();
            if kept.is_empty() {
                let shown = found
                    .first()
                    .map_or_else(|| host.clone(), |addr| format!("{host} ({})", addr.ip()));
                return Err(Box::new(Refused(shown)) as Box<dyn StdError + Send + Sync>);
            }
            Ok(Box::new(kept.into_iter()) as Addrs)
        })
    }
}

/// The outcome of one POST.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: Option<StatusCode>,
    /// What went wrong when there is no status: `refused_address`,
    /// `timeout`, `connect`, `tls`, `request`.
    pub error: Option<String>,
    pub latency: Duration,
    pub excerpt: String,
}

#[derive(Debug, Clone)]
pub struct WebhookClient {
    client: Client,
    allow_private: bool,
}

impl WebhookClient {
    pub fn new(
        allow_private: bool,
        connect_timeout: Duration,
        timeout: Duration,
    ) -> Result<Self, reqwest::Error> {
        let client = Client::builder()
            .redirect(Policy::none())
            .no_proxy()
            .connect_timeout(connect_timeout)
            .timeout(timeout)
            .https_only(!allow_private)
            .user_agent(concat!("Stampede-Webhooks/", env!("CARGO_PKG_VERSION")))
            .dns_resolver(Arc::new(PublicOnly { allow_private }))
            .build()?;
        Ok(Self {
            client,
            allow_private,
        })
    }

    /// POST `body` as JSON with `headers` to `url`.
    pub async fn post(&self, url: &str, headers: &[(&str, String)], body: Vec<u8>) -> Answer {
        let started = Instant::now();
        let failed = |error: &str, excerpt: String| Answer {
            status: None,
            error: Some(error.to_owned()),
            latency: started.elapsed(),
            excerpt,
        };
        let Ok(parsed) = Url::parse(url) else {
            return failed("request", "the stored URL does not parse".to_owned());
        };
        let literal = match parsed.host() {
            Some(Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
            Some(Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
            _ => None,
        };
        if let Some(ip) = literal.filter(|ip| !self.allow_private && !is_public(*ip)) {
            return failed("refused_address", Refused(ip.to_string()).to_string());
        }
        let mut request = self
            .client
            .post(parsed)
            .header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let mut response = match request.body(body).send().await {
            Ok(response) => response,
            Err(err) => return failed(kind(&err), describe(&err)),
        };
        let status = response.status();
        let mut excerpt = Vec::new();
        // Read no more than the excerpt: a receiver cannot make us buffer
        // a large answer.
        while excerpt.len() < EXCERPT_BYTES {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    let room = EXCERPT_BYTES - excerpt.len();
                    excerpt.extend_from_slice(&chunk[..chunk.len().min(room)]);
                }
                Ok(None) | Err(_) => break,
            }
        }
        Answer {
            status: Some(status),
            error: None,
            latency: started.elapsed(),
            // Postgres text holds no NUL.
            excerpt: String::from_utf8_lossy(&excerpt).replace('\0', "\u{FFFD}"),
        }
    }
}

fn refused(err: &reqwest::Error) -> Option<&Refused> {
    let mut source = err.source();
    while let Some(inner) = source {
        if let Some(refused) = inner.downcast_ref::<Refused>() {
            return Some(refused);
        }
        source = inner.source();
    }
    None
}

fn kind(err: &reqwest::Error) -> &'static str {
    if refused(err).is_some() {
        "refused_address"
    } else if err.is_timeout() {
        "timeout"
    } else if err.is_connect() {
        "connect"
    } else {
        "request"
    }
}

/// The error and its causes on one line, for the log.
fn describe(err: &reqwest::Error) -> String {
    if let Some(refused) = refused(err) {
        return refused.to_string();
    }
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text.chars().take(500).collect()
}
