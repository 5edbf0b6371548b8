//! What a buyer holds, signed with the server's key (HMAC-SHA256):
//! - an entry token, `{entry id}.{mac}`: proves the place is theirs (entry
//!   ids are published with the pre-queue, so an id alone proves nothing);
//! - a pass, `{event id}.{entry id}.{expiry}.{mac}` (expiry in Unix
//!   seconds): the right to buy once, until the expiry, for that event.
//!
//! Verifying needs no I/O; every instance of a deployment must share the key.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use time::OffsetDateTime;

use crate::{
    domain::{EventId, QueueEntryId},
    error::AppError,
};

type HmacSha256 = Hmac<Sha256>;

/// The key passes and entry tokens are signed with.
#[derive(Clone)]
pub struct RoomKey(HmacSha256);

impl std::fmt::Debug for RoomKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RoomKey(..)")
    }
}

/// Shortest key accepted from configuration.
pub const MIN_KEY_BYTES: usize = 32;

impl RoomKey {
    /// A key from configuration: at least [`MIN_KEY_BYTES`] bytes.
    pub fn from_config(raw: &str) -> Result<Self, String> {
        if raw.len() < MIN_KEY_BYTES {
            return Err(format!(
                "the waiting room key must be at least {MIN_KEY_BYTES} characters"
            ));
        }
        HmacSha256::new_from_slice(raw.as_bytes())
            .map(Self)
            .map_err(|err| format!("the waiting room key: {err}"))
    }

    /// A random key for this process only: passes signed by one instance
    /// are refused by the others (see docs/operating.md, `--waiting-room-key`).
    pub fn random() -> Self {
        use hmac::digest::KeyInit;
        use rand::RngCore as _;
        // A whole block: HMAC's own key size, so no fallible conversion.
        let mut bytes = [0_u8; 64];
        rand::rng().fill_bytes(&mut bytes);
        Self(<HmacSha256 as KeyInit>::new(&bytes.into()))
    }

    fn mac<P: AsRef<[u8]>>(&self, parts: &[P]) -> HmacSha256 {
        let mut mac = self.0.clone();
        for part in parts {
            // Length-prefixed, so that no two lists of parts sign alike.
            let part = part.as_ref();
            mac.update(&(part.len() as u32).to_be_bytes());
            mac.update(part);
        }
        mac
    }

    pub(super) fn sign<P: AsRef<[u8]>>(&self, parts: &[P]) -> String {
        hex::encode(self.mac(parts).finalize().into_bytes())
    }

    pub(super) fn verify<P: AsRef<[u8]>>(&self, parts: &[P], tag_hex: &str) -> bool {
        let Ok(tag) = hex::decode(tag_hex) else {
            return false;
        };
        // Constant-time comparison.
        self.mac(parts).verify_slice(&tag).is_ok()
    }

    fn entry_parts(event_id: EventId, entry: QueueEntryId) -> [Vec<u8>; 3] {
        [
            b"entry".to_vec(),
            event_id.get().as_bytes().to_vec(),
            entry.get().as_bytes().to_vec(),
        ]
    }

    /// A keyed hash (of a client address): comparable, not reversible.
    pub fn keyed_hash(&self, bytes: &[u8]) -> Vec<u8> {
        self.mac(&[&b"client"[..], bytes])
            .finalize()
            .into_bytes()
            .to_vec()
    }

    /// The buyer's token for their entry.
    pub fn entry_token(&self, event_id: EventId, entry: QueueEntryId) -> String {
        let tag = self.sign(&Self::entry_parts(event_id, entry));
        format!("{entry}.{tag}")
    }

    /// The entry an entry token names, if this key signed it for this event
    /// (either form: as joined, or with its place).
    pub fn verify_entry_token(&self, event_id: EventId, token: &str) -> Option<QueueEntryId> {
        self.verify_token(event_id, token).map(|token| token.entry)
    }

    /// Once an entry has its rank, its token carries it: a poll then needs
    /// only the room's admitted-up-to mark, not a read of the entry.
    pub fn ranked_token(&self, event_id: EventId, entry: QueueEntryId, place: Ranked) -> String {
        let (rank, prequeue) = (place.rank.to_string(), u8::from(place.prequeue).to_string());
        let tag = self.sign(&Self::ranked_parts(event_id, entry, &rank, &prequeue));
        format!("{entry}.{rank}.{prequeue}.{tag}")
    }

    fn ranked_parts<'a>(
        event_id: EventId,
        entry: QueueEntryId,
        rank: &'a str,
        prequeue: &'a str,
    ) -> [Vec<u8>; 5] {
        let [_, event, entry] = Self::entry_parts(event_id, entry);
        [
            b"ranked".to_vec(),
            event,
            entry,
            rank.as_bytes().to_vec(),
            prequeue.as_bytes().to_vec(),
        ]
    }

    /// An entry token of either form, if this key signed it for this event.
    pub fn verify_token(&self, event_id: EventId, token: &str) -> Option<EntryToken> {
        let parts: Vec<&str> = token.trim().split('.').collect();
        match parts[..] {
            [entry, tag] => {
                let entry = QueueEntryId::parse(entry)?;
                self.verify(&Self::entry_parts(event_id, entry), tag)
                    .then_some(EntryToken {
                        entry,
                        ranked: None,
                    })
            }
            [entry, rank, prequeue, tag] => {
                let entry = QueueEntryId::parse(entry)?;
                let place = Ranked {
                    rank: rank.parse().ok()?,
                    prequeue: match prequeue {
                        "0" => false,
                        "1" => true,
                        _ => return None,
                    },
                };
                self.verify(&Self::ranked_parts(event_id, entry, rank, prequeue), tag)
                    .then_some(EntryToken {
                        entry,
                        ranked: Some(place),
                    })
            }
            _ => None,
        }
    }

    /// A pass for an admitted entry.
    pub fn pass(&self, event_id: EventId, entry: QueueEntryId, expires_at: OffsetDateTime) -> Pass {
        let expiry = expires_at.unix_timestamp();
        let tag = self.sign(&Pass::parts(event_id, entry, expiry));
        Pass {
            event_id,
            entry,
            expires_unix: expiry,
            tag,
        }
    }

    /// The entry a pass lets buy for `event_id` at `now`, or why not.
    /// Forged passes and passes of another event are `pass_invalid`.
    pub fn check_pass(
        &self,
        event_id: EventId,
        pass: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<QueueEntryId, AppError> {
        let pass = pass.ok_or(AppError::PassRequired)?;
        let pass = Pass::parse(pass).ok_or(AppError::PassInvalid)?;
        let parts = Pass::parts(pass.event_id, pass.entry, pass.expires_unix);
        if pass.event_id != event_id || !self.verify(&parts, &pass.tag) {
            return Err(AppError::PassInvalid);
        }
        if pass.expires_unix <= now.unix_timestamp() {
            return Err(AppError::PassExpired);
        }
        Ok(pass.entry)
    }
}

/// An entry's place once ranked: its rank, and whether it joined in the
/// pre-queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ranked {
    pub rank: i64,
    pub prequeue: bool,
}

/// What a verified entry token says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryToken {
    pub entry: QueueEntryId,
    pub ranked: Option<Ranked>,
}

/// A signed pass, as it travels (cookie, JSON `pass` field).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pass {
    pub event_id: EventId,
    pub entry: QueueEntryId,
    pub expires_unix: i64,
    tag: String,
}

impl Pass {
    fn parts(event_id: EventId, entry: QueueEntryId, expiry: i64) -> [Vec<u8>; 4] {
        [
            b"pass".to_vec(),
            event_id.get().as_bytes().to_vec(),
            entry.get().as_bytes().to_vec(),
            expiry.to_be_bytes().to_vec(),
        ]
    }

    fn parse(raw: &str) -> Option<Self> {
        let mut parts = raw.trim().split('.');
        let event_id = EventId::parse(parts.next()?)?;
        let entry = QueueEntryId::parse(parts.next()?)?;
        let expires_unix = parts.next()?.parse().ok()?;
        let tag = parts.next()?.to_owned();
        if parts.next().is_some() {
            return None;
        }
        Some(Self {
            event_id,
            entry,
            expires_unix,
            tag,
        })
    }
}

impl std::fmt::Display for Pass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}.{}.{}.{}",
            self.event_id, self.entry, self.expires_unix, self.tag
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use time::Duration;

    use super::*;

    fn ids() -> (EventId, QueueEntryId) {
        (
            EventId::from(uuid::Uuid::new_v4()),
            QueueEntryId::from(uuid::Uuid::new_v4()),
        )
    }

    #[test]
    fn a_pass_is_good_for_its_event_until_it_expires() {
        let key = RoomKey::random();
        let (event, entry) = ids();
        let now = OffsetDateTime::now_utc();
        let pass = key
            .pass(event, entry, now + Duration::minutes(10))
            .to_string();
        assert_eq!(key.check_pass(event, Some(&pass), now).unwrap(), entry);
        assert!(matches!(
            key.check_pass(event, Some(&pass), now + Duration::minutes(10)),
            Err(AppError::PassExpired)
        ));
        assert!(matches!(
            key.check_pass(event, None, now),
            Err(AppError::PassRequired)
        ));
        let (other_event, _) = ids();
        assert!(matches!(
            key.check_pass(other_event, Some(&pass), now),
            Err(AppError::PassInvalid)
        ));
        // Another key, or a changed expiry, is a forgery.
        assert!(matches!(
            RoomKey::random().check_pass(event, Some(&pass), now),
            Err(AppError::PassInvalid)
        ));
        let later = (now + Duration::hours(5)).unix_timestamp();
        let mut parts: Vec<&str> = pass.split('.').collect();
        let later = later.to_string();
        parts[2] = &later;
        assert!(matches!(
            key.check_pass(event, Some(&parts.join(".")), now),
            Err(AppError::PassInvalid)
        ));
        assert!(matches!(
            key.check_pass(event, Some("garbage"), now),
            Err(AppError::PassInvalid)
        ));
    }

    #[test]
    fn an_entry_token_proves_the_entry_for_its_event_only() {
        let key = RoomKey::random();
        let (event, entry) = ids();
        let token = key.entry_token(event, entry);
        assert_eq!(key.verify_entry_token(event, &token), Some(entry));
        assert_eq!(key.verify_entry_token(ids().0, &token), None);
        assert_eq!(key.verify_entry_token(event, &entry.to_string()), None);
        let (_, other) = ids();
        let forged = format!("{other}.{}", token.split_once('.').unwrap().1);
        assert_eq!(key.verify_entry_token(event, &forged), None);
    }

    #[test]
    fn a_ranked_token_proves_the_entry_and_its_place() {
        let key = RoomKey::random();
        let (event, entry) = ids();
        let place = Ranked {
            rank: 1234,
            prequeue: true,
        };
        let token = key.ranked_token(event, entry, place);
        let verified = key.verify_token(event, &token).unwrap();
        assert_eq!((verified.entry, verified.ranked), (entry, Some(place)));
        assert_eq!(key.verify_entry_token(event, &token), Some(entry));
        assert_eq!(key.verify_token(ids().0, &token), None);
        // A better place, or another prequeue bit, is a forgery.
        let parts: Vec<&str> = token.split('.').collect();
        for (i, forged) in [(1, "1"), (2, "0")] {
            let mut forged_parts = parts.clone();
            forged_parts[i] = forged;
            assert_eq!(key.verify_token(event, &forged_parts.join(".")), None);
        }
        // The plain token's tag does not sign a place.
        let plain = key.entry_token(event, entry);
        let tag = plain.split_once('.').unwrap().1;
        assert_eq!(key.verify_token(event, &format!("{entry}.1.0.{tag}")), None);
        assert_eq!(key.verify_token(event, &format!("{entry}.x.0.{tag}")), None);
    }

    #[test]
    fn a_short_configured_key_is_refused() {
        assert!(RoomKey::from_config("short").is_err());
        assert!(RoomKey::from_config(&"k".repeat(32)).is_ok());
    }
}
