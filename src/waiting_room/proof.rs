//! The proof of work at the door (issue 12): a small cost per queue entry,
//! paid by the joining browser (a Web Worker, `static/proof-worker.js`) or
//! API client, checked by the server with one HMAC and one SHA-256.
//!
//! **The rule.** The server hands out a challenge,
//! `{event id}.{expiry}.{bits}.{salt}.{mac}` (event id as 32 hex digits,
//! expiry in Unix seconds, `bits` the difficulty, `salt` 16 random bytes in
//! hex, `mac` an HMAC-SHA256 over the rest with the room key). The client
//! finds a nonce, 1 to 20 decimal digits, such that
//! SHA-256 of the ASCII text `{challenge}.{nonce}` starts with at least
//! `bits` zero bits, and sends `{challenge}.{nonce}` as its proof. That takes
//! 2^bits hashes on average.
//!
//! **One entry per solution.** The salt is stored with the entry the proof
//! created, under a unique index (`queue_entries_proof_once`): replaying a
//! solution creates nothing.

use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use super::RoomKey;
use crate::{domain::EventId, error::AppError};

/// Leading zero bits, unless configured: 2^18 = 262,144 SHA-256 hashes on
/// average. `static/proof-worker.js` does ~1.2 million a second on one core
/// of the 2-core benchmark box (V8, as in Chromium), 0.2 s; a phone's
/// browser is some 4-5 times slower, about a second (see docs/architecture.md,
/// "The waiting room").
pub const DEFAULT_PROOF_BITS: u32 = 18;

/// The most a deployment may ask (2^32 hashes is minutes even on a laptop).
pub const MAX_PROOF_BITS: u32 = 32;

/// How long a challenge may be solved and sent.
pub const CHALLENGE_TTL: time::Duration = time::Duration::minutes(5);

/// A challenge as handed out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    pub token: String,
    pub bits: u32,
    pub expires_at: OffsetDateTime,
}

impl Challenge {
    /// Hashes a solver needs on average.
    pub fn expected_hashes(&self) -> u64 {
        1_u64 << self.bits.min(63)
    }
}

/// A checked proof: its salt is stored with the entry it creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProofSalt(pub(super) Vec<u8>);

impl ProofSalt {
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

fn parts(event_id: EventId, expiry: i64, bits: u32, salt: &[u8]) -> [Vec<u8>; 5] {
    [
        b"proof".to_vec(),
        event_id.get().as_bytes().to_vec(),
        expiry.to_be_bytes().to_vec(),
        bits.to_be_bytes().to_vec(),
        salt.to_vec(),
    ]
}

impl RoomKey {
    /// A fresh challenge for joining `event_id`'s queue.
    pub fn challenge(&self, event_id: EventId, bits: u32, now: OffsetDateTime) -> Challenge {
        use rand::RngCore as _;
        let mut salt = [0_u8; 16];
        rand::rng().fill_bytes(&mut salt);
        let expires_at = now + CHALLENGE_TTL;
        let expiry = expires_at.unix_timestamp();
        let tag = self.sign(&parts(event_id, expiry, bits, &salt));
        Challenge {
            token: format!(
                "{}.{expiry}.{bits}.{}.{tag}",
                event_id.get().simple(),
                hex::encode(salt)
            ),
            bits,
            expires_at,
        }
    }

    /// The salt of a valid proof for `event_id` at `now`, or why not:
    /// `proof_required` (none), `proof_expired`, `proof_invalid` (malformed,
    /// forged, another event's, or not enough zero bits).
    pub fn check_proof(
        &self,
        event_id: EventId,
        proof: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<ProofSalt, AppError> {
        let proof = proof
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .ok_or(AppError::ProofRequired)?;
        let parsed = Parsed::parse(proof).ok_or(AppError::ProofInvalid)?;
        let signed = parts(parsed.event_id, parsed.expiry, parsed.bits, &parsed.salt);
        if parsed.event_id != event_id || !self.verify(&signed, parsed.tag) {
            return Err(AppError::ProofInvalid);
        }
        if parsed.expiry <= now.unix_timestamp() {
            return Err(AppError::ProofExpired);
        }
        if leading_zero_bits(&Sha256::digest(proof.as_bytes())) < parsed.bits {
            return Err(AppError::ProofInvalid);
        }
        Ok(ProofSalt(parsed.salt))
    }
}

struct Parsed<'a> {
    event_id: EventId,
    expiry: i64,
    bits: u32,
    salt: Vec<u8>,
    tag: &'a str,
}

impl<'a> Parsed<'a> {
    fn parse(proof: &'a str) -> Option<Self> {
        let mut parts = proof.split('.');
        let event_id = EventId::parse(parts.next()?)?;
        let expiry = parts.next()?.parse().ok()?;
        let bits: u32 = parts.next()?.parse().ok()?;
        let salt = hex::decode(parts.next()?).ok().filter(|s| s.len() == 16)?;
        let tag = parts.next()?;
        let nonce = parts.next()?;
        if parts.next().is_some()
            || bits > MAX_PROOF_BITS
            || nonce.is_empty()
            || nonce.len() > 20
            || !nonce.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        Some(Self {
            event_id,
            expiry,
            bits,
            salt,
            tag,
        })
    }
}

/// Zero bits at the start of a hash.
pub fn leading_zero_bits(hash: &[u8]) -> u32 {
    let mut bits = 0;
    for byte in hash {
        if *byte == 0 {
            bits += 8;
        } else {
            return bits + byte.leading_zeros();
        }
    }
    bits
}

/// Solve a challenge by the rule (what the Web Worker does; for API
/// clients written in Rust, the load generator and tests).
pub fn solve(challenge: &str, bits: u32) -> String {
    let mut nonce: u64 = 0;
    loop {
        let candidate = format!("{challenge}.{nonce}");
        if leading_zero_bits(&Sha256::digest(candidate.as_bytes())) >= bits {
            return candidate;
        }
        nonce += 1;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn event() -> EventId {
        EventId::from(uuid::Uuid::new_v4())
    }

    #[test]
    fn a_solved_challenge_is_a_proof_for_its_event_until_it_expires() {
        let key = RoomKey::random();
        let event_id = event();
        let now = OffsetDateTime::now_utc();
        let challenge = key.challenge(event_id, 8, now);
        let proof = solve(&challenge.token, 8);
        let salt = key.check_proof(event_id, Some(&proof), now).unwrap();
        assert_eq!(salt.as_bytes().len(), 16);
        assert!(leading_zero_bits(&Sha256::digest(proof.as_bytes())) >= 8);
        assert!(matches!(
            key.check_proof(event_id, Some(&proof), challenge.expires_at),
            Err(AppError::ProofExpired)
        ));
        assert!(matches!(
            key.check_proof(event(), Some(&proof), now),
            Err(AppError::ProofInvalid)
        ));
        assert!(matches!(
            RoomKey::random().check_proof(event_id, Some(&proof), now),
            Err(AppError::ProofInvalid)
        ));
        assert!(matches!(
            key.check_proof(event_id, None, now),
            Err(AppError::ProofRequired)
        ));
        assert!(matches!(
            key.check_proof(event_id, Some(&challenge.token), now),
            Err(AppError::ProofInvalid)
        ));
    }

    #[test]
    fn a_nonce_without_the_zero_bits_or_a_lowered_difficulty_is_refused() {
        let key = RoomKey::random();
        let event_id = event();
        let now = OffsetDateTime::now_utc();
        let challenge = key.challenge(event_id, 12, now);
        // The first nonce whose hash misses the difficulty.
        let wrong = (0..)
            .map(|n| format!("{}.{n}", challenge.token))
            .find(|c| leading_zero_bits(&Sha256::digest(c.as_bytes())) < 12)
            .unwrap();
        assert!(matches!(
            key.check_proof(event_id, Some(&wrong), now),
            Err(AppError::ProofInvalid)
        ));
        // Claiming an easier difficulty breaks the MAC.
        let easier = challenge.token.replacen(".12.", ".0.", 1);
        let proof = solve(&easier, 0);
        assert!(matches!(
            key.check_proof(event_id, Some(&proof), now),
            Err(AppError::ProofInvalid)
        ));
    }

    #[test]
    fn leading_zero_bits_counts_across_bytes() {
        assert_eq!(leading_zero_bits(&[0, 0, 0x10, 0xff]), 19);
        assert_eq!(leading_zero_bits(&[0x80]), 0);
        assert_eq!(leading_zero_bits(&[0, 0]), 16);
    }
}
