//! Standard Webhooks signatures (https://www.standardwebhooks.com): the
//! secret is `whsec_` and base64 of random bytes; the signature is
//! `v1,` and base64 of HMAC-SHA256, keyed with the decoded bytes, over
//! `{webhook-id}.{webhook-timestamp}.{body}`.

use base64::{Engine, engine::general_purpose::STANDARD};
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

const PREFIX: &str = "whsec_";
/// Random bytes in a new secret (the spec asks for 24 to 64).
const SECRET_BYTES: usize = 32;

/// A fresh signing secret, `whsec_<base64>`.
pub fn new_secret() -> String {
    let mut bytes = [0u8; SECRET_BYTES];
    rand::rng().fill_bytes(&mut bytes);
    format!("{PREFIX}{}", STANDARD.encode(bytes))
}

#[derive(Debug, thiserror::Error)]
#[error("the stored webhook secret is not `whsec_` and base64")]
pub struct BadSecret;

/// The `webhook-signature` header's value for one message.
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Result<String, BadSecret> {
    let key = STANDARD
        .decode(secret.strip_prefix(PREFIX).ok_or(BadSecret)?)
        .map_err(|_| BadSecret)?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).map_err(|_| BadSecret)?;
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Ok(format!(
        "v1,{}",
        STANDARD.encode(mac.finalize().into_bytes())
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks reference libraries' tests.
    #[test]
    fn signs_as_the_reference_libraries_do() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            sign(secret, id, 1614265330, body).unwrap(),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn new_secrets_are_prefixed_random_and_usable() {
        let (a, b) = (new_secret(), new_secret());
        assert_ne!(a, b);
        assert!(a.starts_with("whsec_"));
        assert_eq!(STANDARD.decode(&a[6..]).unwrap().len(), SECRET_BYTES);
        assert!(sign(&a, "x", 1, b"{}").is_ok());
        assert!(sign("nope", "x", 1, b"{}").is_err());
    }
}
