//! The confirmation link of a held order: a single-use token that only the
//! buyer's mailbox receives.
//!
//! The token is derived from the order id with a key the app keeps
//! ([`ConfirmKey`]), so the mailer, which sends it later from the outbox,
//! can rebuild it without anyone storing it: the orders table keeps only
//! its SHA-256 ([`ConfirmToken::hash`]), checked when the link is followed.

use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
use hmac::{Hmac, Mac, digest::KeyInit};
use sha2::{Digest as _, Sha256};

use super::{OrderId, OrganizerId, WaitlistEntryId};

type HmacSha256 = Hmac<Sha256>;

/// Shortest configured key accepted.
pub const MIN_CONFIRM_KEY_CHARS: usize = 32;

/// The key confirmation tokens are derived with. Every instance of one
/// deployment must share it (the one that writes a hold and the one that
/// mails its link may differ).
#[derive(Clone)]
pub struct ConfirmKey(HmacSha256);

impl ConfirmKey {
    pub fn from_config(raw: &str) -> Result<Self, String> {
        if raw.len() < MIN_CONFIRM_KEY_CHARS {
            return Err(format!(
                "the confirmation key must be at least {MIN_CONFIRM_KEY_CHARS} characters"
            ));
        }
        <HmacSha256 as KeyInit>::new_from_slice(raw.as_bytes())
            .map(Self)
            .map_err(|err| format!("the confirmation key: {err}"))
    }

    /// A key for this process only.
    pub fn random() -> Self {
        use rand::RngCore as _;
        let mut bytes = [0_u8; 64];
        rand::rng().fill_bytes(&mut bytes);
        Self(<HmacSha256 as KeyInit>::new(&bytes.into()))
    }

    /// The order's token.
    pub fn token(&self, order_id: OrderId) -> ConfirmToken {
        self.derive(b"stampede confirm v1\0", order_id.get())
    }

    /// The token of a place on a waiting list: it confirms the place, and
    /// later the held order offered to it (the offer's order keeps its hash).
    pub fn waitlist_token(&self, entry_id: WaitlistEntryId) -> ConfirmToken {
        self.derive(b"stampede waitlist v1\0", entry_id.get())
    }

    /// The token of an organizer's sign-up mail: following it proves the
    /// address, which publishing needs.
    pub fn organizer_token(&self, organizer_id: OrganizerId) -> ConfirmToken {
        self.derive(b"stampede organizer email v1\0", organizer_id.get())
    }

    /// A label per kind of token, so that no token of one kind is one of another.
    fn derive(&self, label: &[u8], id: uuid::Uuid) -> ConfirmToken {
        let mut mac = self.0.clone();
        mac.update(label);
        mac.update(id.as_bytes());
        ConfirmToken(URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()))
    }
}

impl std::fmt::Debug for ConfirmKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConfirmKey(..)")
    }
}

/// A confirmation token, as mailed or as it came back in a link.
#[derive(Clone, PartialEq, Eq)]
pub struct ConfirmToken(String);

impl ConfirmToken {
    /// A token from a link; `None` when it cannot be one.
    pub fn parse(raw: &str) -> Option<Self> {
        super::idempotency::is_secret_text(raw).then(|| Self(raw.to_owned()))
    }

    /// What the orders table keeps.
    pub fn hash(&self) -> Vec<u8> {
        Sha256::digest(self.0.as_bytes()).to_vec()
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ConfirmToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConfirmToken(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order() -> OrderId {
        OrderId::from(uuid::Uuid::new_v4())
    }

    #[test]
    fn a_token_is_the_same_for_one_key_and_order_and_differs_otherwise() {
        let key = ConfirmKey::from_config(&"k".repeat(32)).unwrap();
        let same = ConfirmKey::from_config(&"k".repeat(32)).unwrap();
        let (a, b) = (order(), order());
        assert_eq!(key.token(a), same.token(a));
        assert_ne!(key.token(a), key.token(b));
        assert_ne!(key.token(a), ConfirmKey::random().token(a));
        let token = key.token(a);
        assert_eq!(ConfirmToken::parse(token.as_str()), Some(token.clone()));
        assert_eq!(token.hash(), Sha256::digest(token.as_str()).to_vec());
        assert_ne!(token.hash(), key.token(b).hash());
        assert_eq!(format!("{token:?}"), "ConfirmToken(..)");
        assert_eq!(format!("{key:?}"), "ConfirmKey(..)");
        // A place on a waiting list with the same id has another token.
        let entry = WaitlistEntryId::from(a.get());
        assert_ne!(key.waitlist_token(entry), key.token(a));
        assert_eq!(key.waitlist_token(entry), same.waitlist_token(entry));
        // And so has an organizer.
        let organizer = OrganizerId::from(a.get());
        assert_ne!(key.organizer_token(organizer), key.token(a));
        assert_ne!(key.organizer_token(organizer), key.waitlist_token(entry));
        assert_eq!(
            key.organizer_token(organizer),
            same.organizer_token(organizer)
        );
    }

    #[test]
    fn only_well_formed_tokens_parse_and_short_keys_are_refused() {
        assert!(ConfirmToken::parse("").is_none());
        assert!(ConfirmToken::parse(&"a".repeat(42)).is_none());
        assert!(ConfirmToken::parse(&"a".repeat(44)).is_none());
        assert!(ConfirmToken::parse(&format!("{}=", "a".repeat(42))).is_none());
        assert!(ConfirmToken::parse(&format!("{}.", "a".repeat(42))).is_none());
        assert!(ConfirmToken::parse(&format!("-_{}Q", "Z9".repeat(20))).is_some());
        assert!(ConfirmToken::parse(&"a".repeat(43)).is_some());
        assert!(ConfirmKey::from_config(&"k".repeat(31)).is_err());
        assert!(ConfirmKey::from_config(&"k".repeat(32)).is_ok());
    }
}
