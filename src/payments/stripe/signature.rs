//! Stripe's webhook signatures: the `Stripe-Signature` header is
//! `t=<unix seconds>,v1=<hex>[,v1=<hex>...][,v0=...]`, each `v1` the hex of
//! HMAC-SHA256 over `{t}.{raw body}`, keyed with the endpoint secret's bytes
//! as written (`whsec_` included, not decoded). Several `v1` appear while a
//! secret is being rolled; one match is enough. `v0` (test mode's old
//! scheme) is never accepted.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// How far `t` may be from now, either way, before a signed event is
/// refused as a replay (Stripe's libraries use the same five minutes).
pub const SIGNATURE_TOLERANCE_SECS: i64 = 300;

/// Why a webhook was refused. Answer all of them with 400: Stripe retries.
#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    #[error("no Stripe-Signature header")]
    Missing,
    #[error("the Stripe-Signature header has no timestamp or no v1 signature")]
    Malformed,
    #[error("the signature's timestamp is more than {SIGNATURE_TOLERANCE_SECS} s from now")]
    Expired,
    #[error("no v1 signature matches")]
    Mismatch,
    /// The signature verified, yet the body is not a Stripe event.
    #[error("the signed body is not a Stripe event: {0}")]
    Payload(#[source] serde_json::Error),
}

/// The parts of a `Stripe-Signature` header we use.
struct Header<'a> {
    timestamp: i64,
    v1: Vec<&'a str>,
}

fn parse(header: &str) -> Result<Header<'_>, SignatureError> {
    let mut timestamp = None;
    let mut v1 = Vec::new();
    for item in header.split(',') {
        let (key, value) = item.split_once('=').ok_or(SignatureError::Malformed)?;
        match key.trim() {
            // Two timestamps would make it ambiguous which one was signed.
            "t" if timestamp.is_some() => return Err(SignatureError::Malformed),
            "t" => {
                timestamp = Some(
                    value
                        .trim()
                        .parse::<i64>()
                        .map_err(|_| SignatureError::Malformed)?,
                );
            }
            "v1" => v1.push(value.trim()),
            _ => {}
        }
    }
    match timestamp {
        Some(timestamp) if !v1.is_empty() => Ok(Header { timestamp, v1 }),
        _ => Err(SignatureError::Malformed),
    }
}

/// The endpoint secret, keyed once: HMAC's key schedule is not redone per
/// event, and no panic path is needed where HMAC refuses a key.
#[derive(Clone)]
pub struct WebhookKey(Hmac<Sha256>);

impl WebhookKey {
    /// `secret` is the `whsec_...` string as the dashboard shows it.
    pub fn new(secret: &str) -> Result<Self, hmac::digest::InvalidLength> {
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).map(Self)
    }

    fn mac(&self, timestamp: i64, body: &[u8]) -> Hmac<Sha256> {
        let mut mac = self.0.clone();
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        mac
    }

    /// Checks `header` against `body`, `now` in unix seconds. The signature
    /// is checked before the timestamp, so a stale forgery reads as a
    /// mismatch, and `Expired` always means Stripe signed it.
    pub fn verify(
        &self,
        header: Option<&str>,
        body: &[u8],
        now: i64,
    ) -> Result<(), SignatureError> {
        let header = header
            .filter(|h| !h.trim().is_empty())
            .ok_or(SignatureError::Missing)?;
        let Header { timestamp, v1 } = parse(header)?;
        let expected = self.mac(timestamp, body);
        // `verify_slice` compares in constant time and refuses any other
        // length (a truncated signature); what is not hex cannot match.
        let matches = v1.iter().any(|candidate| {
            hex::decode(candidate).is_ok_and(|bytes| expected.clone().verify_slice(&bytes).is_ok())
        });
        if !matches {
            return Err(SignatureError::Mismatch);
        }
        if now.abs_diff(timestamp) > SIGNATURE_TOLERANCE_SECS.unsigned_abs() {
            return Err(SignatureError::Expired);
        }
        Ok(())
    }

    /// The `Stripe-Signature` header Stripe would send for `body` at
    /// `timestamp`: for tests, and for replaying an event by hand.
    pub fn signature_header(&self, timestamp: i64, body: &[u8]) -> String {
        let signature = hex::encode(self.mac(timestamp, body).finalize().into_bytes());
        format!("t={timestamp},v1={signature}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_test_secret";
    const BODY: &[u8] = br#"{"id":"evt_1","type":"payment_intent.succeeded"}"#;
    const T: i64 = 1_492_774_577;

    fn key(secret: &str) -> WebhookKey {
        WebhookKey::new(secret).unwrap()
    }

    fn signature_header(secret: &str, timestamp: i64, body: &[u8]) -> String {
        key(secret).signature_header(timestamp, body)
    }

    fn verify(
        secret: &str,
        header: Option<&str>,
        body: &[u8],
        now: i64,
    ) -> Result<(), SignatureError> {
        key(secret).verify(header, body, now)
    }

    fn signature(secret: &str, timestamp: i64, body: &[u8]) -> String {
        let header = signature_header(secret, timestamp, body);
        header.split_once(",v1=").unwrap().1.to_owned()
    }

    #[test]
    fn matches_an_hmac_computed_independently() {
        // python3 -c 'import hmac,hashlib;print(hmac.new(b"whsec_test_secret",
        //   b"1492774577.{\"a\":1}", hashlib.sha256).hexdigest())'
        assert_eq!(
            signature(SECRET, T, br#"{"a":1}"#),
            "739d49804fdca77d8a07462fc9f2627d4957adbd32fd530393ccaad298b10455"
        );
    }

    #[test]
    fn accepts_a_valid_signature() {
        let header = signature_header(SECRET, T, BODY);
        assert!(verify(SECRET, Some(&header), BODY, T).is_ok());
        // Anywhere inside the tolerance, either side.
        assert!(verify(SECRET, Some(&header), BODY, T + 300).is_ok());
        assert!(verify(SECRET, Some(&header), BODY, T - 300).is_ok());
    }

    #[test]
    fn accepts_when_any_of_several_v1_matches() {
        let good = signature(SECRET, T, BODY);
        let other = signature("whsec_old", T, BODY);
        let header = format!("t={T}, v1={other},v1={good},v0={other},x=y");
        assert!(verify(SECRET, Some(&header), BODY, T).is_ok());
    }

    #[test]
    fn refuses_a_missing_header() {
        assert!(matches!(
            verify(SECRET, None, BODY, T),
            Err(SignatureError::Missing)
        ));
        assert!(matches!(
            verify(SECRET, Some("  "), BODY, T),
            Err(SignatureError::Missing)
        ));
    }

    #[test]
    fn refuses_malformed_headers() {
        let good = signature(SECRET, T, BODY);
        for header in [
            format!("v1={good}"),
            format!("t={T}"),
            format!("t={T},v0={good}"),
            format!("t=soon,v1={good}"),
            format!("t={T},t={T},v1={good}"),
            format!("t={T},v1{good}"),
            "garbage".to_owned(),
        ] {
            assert!(
                matches!(
                    verify(SECRET, Some(&header), BODY, T),
                    Err(SignatureError::Malformed)
                ),
                "{header}"
            );
        }
    }

    #[test]
    fn refuses_a_wrong_secret_and_a_tampered_body() {
        let header = signature_header("whsec_other", T, BODY);
        assert!(matches!(
            verify(SECRET, Some(&header), BODY, T),
            Err(SignatureError::Mismatch)
        ));
        let header = signature_header(SECRET, T, BODY);
        let tampered = br#"{"id":"evt_1","type":"payment_intent.succeeded" }"#;
        assert!(matches!(
            verify(SECRET, Some(&header), tampered, T),
            Err(SignatureError::Mismatch)
        ));
        // The timestamp is signed too.
        let moved = header.replace(&format!("t={T}"), &format!("t={}", T + 1));
        assert!(matches!(
            verify(SECRET, Some(&moved), BODY, T),
            Err(SignatureError::Mismatch)
        ));
    }

    #[test]
    fn refuses_signatures_outside_the_tolerance() {
        let header = signature_header(SECRET, T, BODY);
        assert!(matches!(
            verify(SECRET, Some(&header), BODY, T + 301),
            Err(SignatureError::Expired)
        ));
        assert!(matches!(
            verify(SECRET, Some(&header), BODY, T - 301),
            Err(SignatureError::Expired)
        ));
    }

    /// The comparison goes through `verify_slice` on the decoded bytes: a
    /// prefix of the right MAC (which a `starts_with` or truncated compare
    /// would pass), upper-case hex of it, and non-hex are handled as bytes.
    #[test]
    fn compares_whole_decoded_macs() {
        let good = signature(SECRET, T, BODY);
        for candidate in [&good[..32], &good[..good.len() - 2], "zz", ""] {
            let header = format!("t={T},v1={candidate}");
            assert!(
                matches!(
                    verify(SECRET, Some(&header), BODY, T),
                    Err(SignatureError::Mismatch)
                ),
                "{candidate}"
            );
        }
        let upper = format!("t={T},v1={}", good.to_ascii_uppercase());
        assert!(verify(SECRET, Some(&upper), BODY, T).is_ok());
    }
}
