use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use rand::RngCore;
use sha2::{Digest, Sha256};

/// Shortest idempotency key accepted: with the URL-safe alphabet, enough
/// room for a key that cannot be guessed (a UUID, 128 random bits).
pub const MIN_KEY_CHARS: usize = 16;
/// Longest idempotency key accepted.
pub const MAX_KEY_CHARS: usize = 200;

/// A client-chosen key that makes a purchase safe to retry: the same key from
/// the same buyer always yields the same order. Whoever knows the buyer's
/// email and the key can replay (read) the order, so keys must be long
/// enough to be unguessable: 16–200 characters of `A-Z a-z 0-9 _ -`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    pub fn parse(raw: &str) -> Result<Self, String> {
        Self::check(raw.trim())?;
        Ok(Self(raw.trim().to_owned()))
    }

    /// [`Self::parse`] of an owned input, kept without a copy when it
    /// needs no trimming (a JSON body's key, once per purchase).
    pub fn from_input(raw: String) -> Result<Self, String> {
        if raw.trim().len() != raw.len() {
            return Self::parse(&raw);
        }
        Self::check(&raw)?;
        Ok(Self(raw))
    }

    fn check(raw: &str) -> Result<(), String> {
        if raw.is_empty() {
            return Err("An idempotency key is required; reload the page and try again.".into());
        }
        if !raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
        {
            return Err(
                "The idempotency key may only hold letters, digits, - and _ (use a random UUID)."
                    .into(),
            );
        }
        // ASCII only from here: bytes are characters.
        if !(MIN_KEY_CHARS..=MAX_KEY_CHARS).contains(&raw.len()) {
            return Err(format!(
                "The idempotency key must be {MIN_KEY_CHARS} to {MAX_KEY_CHARS} characters \
                 long (use a random UUID)."
            ));
        }
        Ok(())
    }

    /// A fresh random key, embedded in every rendered buy form.
    pub fn generate() -> Self {
        Self(uuid::Uuid::new_v4().to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The secret that lets a buyer cancel an order: 256 random bits, given to
/// the buyer once (in the order page's URL and the API's creation answer)
/// and stored only as its SHA-256. The order id alone cannot cancel.
#[derive(Clone, PartialEq, Eq)]
pub struct CancelSecret(String);

/// Characters of a 32-byte secret in base64url without padding: the cancel
/// secret, the door secret and the confirmation token.
pub(super) const SECRET_CHARS: usize = 43;

/// Whether `raw` can be such a secret, as it comes from a link or a form.
pub(super) fn is_secret_text(raw: &str) -> bool {
    raw.len() == SECRET_CHARS
        && raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
}

impl CancelSecret {
    pub fn generate() -> Self {
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        Self(URL_SAFE_NO_PAD.encode(bytes))
    }

    /// A secret from a URL or a form; `None` when it cannot be one.
    pub fn parse(raw: &str) -> Option<Self> {
        is_secret_text(raw).then(|| Self(raw.to_owned()))
    }

    /// What the orders table keeps.
    pub fn hash(&self) -> Vec<u8> {
        Sha256::digest(self.0.as_bytes()).to_vec()
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for CancelSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CancelSecret(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_uuids_and_refuses_odd_characters() {
        assert!(IdempotencyKey::parse(IdempotencyKey::generate().as_str()).is_ok());
        assert!(IdempotencyKey::parse("").is_err());
        assert!(IdempotencyKey::parse("has space in it 0123456789").is_err());
        assert!(IdempotencyKey::parse(&"k".repeat(MAX_KEY_CHARS + 1)).is_err());
        assert!(IdempotencyKey::parse(&"k".repeat(MAX_KEY_CHARS)).is_ok());
    }

    /// An owned input gives what the borrowed one gives, copied or not.
    #[test]
    fn from_input_is_parse() {
        let long = "k".repeat(MAX_KEY_CHARS + 1);
        for raw in [
            "3b0f0c7e-6a52-4d8e-9d44-2f8f0f1b9c11",
            "  3b0f0c7e-6a52-4d8e-9d44-2f8f0f1b9c11 ",
            "",
            "short",
            "has space in it 0123456789",
            long.as_str(),
        ] {
            assert_eq!(
                IdempotencyKey::from_input(raw.to_owned()),
                IdempotencyKey::parse(raw),
                "{raw:?}"
            );
        }
    }

    #[test]
    fn short_keys_and_keys_outside_the_url_safe_alphabet_are_refused() {
        for raw in [
            "1",
            "k1",
            "fifteen-chars-x",
            "0b9d6c1e.5a43.4f7e",
            "0b9d6c1e:5a43:4f7e",
            "0b9d6c1e-5a43-4f7é",
        ] {
            assert!(IdempotencyKey::parse(raw).is_err(), "{raw}");
        }
        for raw in ["sixteen-chars-ok", "0b9d6c1e_5a43_4f7e_9a57_2f0c3c1d8e21"] {
            assert!(IdempotencyKey::parse(raw).is_ok(), "{raw}");
        }
    }

    #[test]
    fn cancel_secrets_round_trip_and_differ() {
        let a = CancelSecret::generate();
        let b = CancelSecret::generate();
        assert_ne!(a, b);
        assert_eq!(CancelSecret::parse(a.as_str()), Some(a.clone()));
        assert_eq!(a.hash().len(), 32);
        assert_eq!(CancelSecret::parse("short"), None);
        assert_eq!(CancelSecret::parse(&"!".repeat(43)), None);
    }

    #[test]
    fn keeps_keys_as_given_without_the_spaces_around() {
        let longest = "k".repeat(MAX_KEY_CHARS);
        assert_eq!(IdempotencyKey::parse(&longest).unwrap().as_str(), longest);
        assert_eq!(
            IdempotencyKey::parse(" order-1_0123456789abcdef ")
                .unwrap()
                .as_str(),
            "order-1_0123456789abcdef"
        );
    }

    #[test]
    fn cancel_secrets_take_the_url_safe_alphabet_and_hash_with_sha256() {
        let dashed = format!("-_{}", "a".repeat(41));
        assert_eq!(CancelSecret::parse(&dashed).unwrap().as_str(), dashed);
        assert_eq!(CancelSecret::parse(&"a".repeat(42)), None);
        assert_eq!(CancelSecret::parse(&"a".repeat(44)), None);
        let secret = CancelSecret::parse(&"A".repeat(43)).unwrap();
        let hex: String = secret.hash().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "0f007385b6f9d4b7eeb2748605afe1a984a0a3bfa3f014d09e2a784ce9e5cd1a"
        );
        assert_eq!(CancelSecret::generate().as_str().len(), 43);
        assert_eq!(format!("{secret:?}"), "CancelSecret(..)");
    }
}
