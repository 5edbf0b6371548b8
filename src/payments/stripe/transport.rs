//! One Stripe call: paced, authenticated, form-encoded, retried.

use std::{num::NonZeroU32, sync::OnceLock, time::Duration};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use rand::Rng;
use reqwest::{Client, Method, Response, StatusCode, header::HeaderMap, redirect::Policy};
use serde::de::DeserializeOwned;
use url::Url;

use super::{StripeError, wire::ErrorBody};

/// Attempts per call, the first included.
pub(super) const MAX_ATTEMPTS: u32 = 4;
/// Back-off before the second attempt; doubled for each further one.
const BACKOFF_BASE: Duration = Duration::from_millis(200);
/// Longest back-off we choose ourselves.
const BACKOFF_CAP: Duration = Duration::from_secs(5);
/// Longest `Retry-After` we honour: a caller waits on this call.
const RETRY_AFTER_CAP: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// The process's one pacer: the rate is Stripe's per account, not per
/// client, so two `Stripe`s must not get a budget each.
static PACER: OnceLock<(NonZeroU32, DefaultDirectRateLimiter)> = OnceLock::new();

pub(super) fn pacer(per_second: NonZeroU32) -> &'static DefaultDirectRateLimiter {
    let (rate, pacer) = PACER.get_or_init(|| {
        (
            per_second,
            RateLimiter::direct(Quota::per_second(per_second)),
        )
    });
    if *rate != per_second {
        tracing::warn!(
            kept = rate.get(),
            asked = per_second.get(),
            "Stripe pacing is process-wide; keeping the first rate"
        );
    }
    pacer
}

pub(super) struct Transport {
    pub http: Client,
    pub secret_key: String,
    pub pacer: &'static DefaultDirectRateLimiter,
}

/// What one attempt came to.
enum Attempt {
    Done(bytes::Bytes),
    Refused(StripeError),
    Retry {
        why: String,
        after: Option<Duration>,
    },
}

impl Transport {
    pub fn client() -> Result<Client, StripeError> {
        Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            // Stripe never redirects; one that did must not get our key.
            .redirect(Policy::none())
            .user_agent(concat!("stampede/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(StripeError::Http)
    }

    /// Sends until Stripe answers 2xx or a final 4xx, or the attempts run
    /// out. `idempotency_key` goes on every attempt alike, which is what
    /// makes retrying a create safe.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        url: Url,
        form: Option<&[(&str, String)]>,
        idempotency_key: Option<&str>,
    ) -> Result<T, StripeError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            self.pacer.until_ready().await;
            let mut request = self
                .http
                .request(method.clone(), url.clone())
                .basic_auth(&self.secret_key, None::<&str>);
            if let Some(key) = idempotency_key {
                request = request.header("Idempotency-Key", key);
            }
            if let Some(form) = form {
                request = request.form(form);
            }
            let outcome = match request.send().await {
                Ok(response) => read(response).await,
                Err(err) if err.is_builder() => return Err(StripeError::Http(err)),
                Err(err) => Attempt::Retry {
                    why: transport_error(&err),
                    after: None,
                },
            };
            match outcome {
                Attempt::Done(body) => {
                    return serde_json::from_slice(&body).map_err(StripeError::Decode);
                }
                Attempt::Refused(err) => return Err(err),
                Attempt::Retry { why, .. } if attempt >= MAX_ATTEMPTS => {
                    return Err(StripeError::Exhausted {
                        attempts: attempt,
                        last: why,
                    });
                }
                Attempt::Retry { why, after } => {
                    let delay = after.unwrap_or_else(|| backoff(attempt));
                    tracing::warn!(
                        %method,
                        path = url.path(),
                        attempt,
                        delay_ms = delay.as_millis() as u64,
                        %why,
                        "Stripe call failed; retrying"
                    );
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }
}

async fn read(response: Response) -> Attempt {
    let status = response.status();
    let retry_after = retry_after(response.headers());
    let should_retry = should_retry(response.headers());
    let body = match response.bytes().await {
        Ok(body) => body,
        Err(err) => {
            return Attempt::Retry {
                why: transport_error(&err),
                after: None,
            };
        }
    };
    if status.is_success() {
        return Attempt::Done(body);
    }
    let message = error_message(status, &body);
    let retryable =
        should_retry.unwrap_or(status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error());
    if retryable {
        Attempt::Retry {
            why: message,
            after: retry_after,
        }
    } else {
        Attempt::Refused(StripeError::Api {
            status: status.as_u16(),
            message,
        })
    }
}

/// reqwest's message with its causes: "error sending request" alone does
/// not say whether it was a refused connection or a timeout.
fn transport_error(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Stripe's `error.message` (and `type`), else the status and a bit of body.
fn error_message(status: StatusCode, body: &[u8]) -> String {
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(ErrorBody { error }) => match (error.kind, error.message) {
            (Some(kind), Some(message)) => format!("{kind}: {message}"),
            (None, Some(message)) => message,
            (kind, None) => kind.unwrap_or_else(|| status.to_string()),
        },
        Err(_) => {
            let text = String::from_utf8_lossy(body);
            let excerpt: String = text.chars().take(200).collect();
            format!("{status}: {excerpt}")
        }
    }
}

/// `Retry-After` in seconds (the form Stripe uses), capped.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds: u64 = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds).min(RETRY_AFTER_CAP))
}

/// Stripe's own verdict, when it gives one (`Stripe-Should-Retry`), as
/// its official libraries read it.
fn should_retry(headers: &HeaderMap) -> Option<bool> {
    match headers.get("stripe-should-retry")?.to_str().ok()? {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// Full jitter: anywhere from zero to the exponential ceiling, so clients
/// that failed together do not come back together.
pub(super) fn backoff(attempt: u32) -> Duration {
    let doublings = attempt.saturating_sub(1).min(16);
    let ceiling = BACKOFF_BASE.saturating_mul(1 << doublings).min(BACKOFF_CAP);
    let millis = u64::try_from(ceiling.as_millis()).unwrap_or(u64::MAX);
    Duration::from_millis(rand::rng().random_range(0..=millis))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn backoff_stays_under_its_doubling_ceiling_and_the_cap() {
        for _ in 0..200 {
            assert!(backoff(1) <= Duration::from_millis(200));
            assert!(backoff(2) <= Duration::from_millis(400));
            assert!(backoff(3) <= Duration::from_millis(800));
            assert!(backoff(30) <= BACKOFF_CAP);
        }
    }

    #[test]
    fn retry_after_is_read_in_seconds_and_capped() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after", HeaderValue::from_static("3600"));
        assert_eq!(retry_after(&headers), Some(RETRY_AFTER_CAP));
        headers.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&headers), None);
    }

    #[test]
    fn error_messages_come_from_stripes_error_body() {
        let body =
            br#"{"error":{"message":"No such payment_intent","type":"invalid_request_error"}}"#;
        assert_eq!(
            error_message(StatusCode::NOT_FOUND, body),
            "invalid_request_error: No such payment_intent"
        );
        assert_eq!(
            error_message(StatusCode::BAD_GATEWAY, b"<html>bad gateway</html>"),
            "502 Bad Gateway: <html>bad gateway</html>"
        );
    }
}
