//! Check-in at the door: what a door device sends (the ticket code, the
//! door's name, the scan's nonce), the staff link's secret and time window,
//! the answer's reason code and the check-in list's cursor.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use rand::RngCore;
use sha2::{Digest, Sha256};
use time::OffsetDateTime;
use uuid::Uuid;

use super::{InvalidField, Lines, refuse_control};

/// Longest ticket code accepted (the codes Stampede issues have 32).
pub const MAX_CODE_CHARS: usize = 64;
/// Shortest code prefix a search accepts.
pub const MIN_PREFIX_CHARS: usize = 4;

/// A ticket code as typed or scanned: spaces and dashes (the order page
/// shows the code in groups) are dropped and letters upper-cased, so
/// `ab12 cd34` is `AB12CD34`. Letters and digits only.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TicketCode(String);

impl TicketCode {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let code: String = raw
            .chars()
            .filter(|c| !c.is_whitespace() && *c != '-')
            .map(|c| c.to_ascii_uppercase())
            .collect();
        if code.is_empty() {
            return Err("Type or scan a ticket code.".into());
        }
        if !code.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err("A ticket code has letters and digits only.".into());
        }
        if code.len() > MAX_CODE_CHARS {
            return Err(format!(
                "A ticket code has at most {MAX_CODE_CHARS} characters."
            ));
        }
        Ok(Self(code))
    }

    /// The start of a code, for a search: at least [`MIN_PREFIX_CHARS`].
    pub fn parse_prefix(raw: &str) -> Result<Self, String> {
        let prefix = Self::parse(raw)?;
        if prefix.0.len() < MIN_PREFIX_CHARS {
            return Err(format!(
                "Give at least {MIN_PREFIX_CHARS} characters of the code."
            ));
        }
        Ok(prefix)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Longest door name.
pub const MAX_DOOR_CHARS: usize = 60;

/// Which door (entrance, device, person) scanned: "North gate". One line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DoorName(String);

impl DoorName {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let name = raw.trim();
        if name.is_empty() {
            return Err("Name the door, e.g. \"North gate\".".into());
        }
        if name.chars().count() > MAX_DOOR_CHARS {
            return Err(format!(
                "A door name has at most {MAX_DOOR_CHARS} characters."
            ));
        }
        refuse_control(name, Lines::One)?;
        Ok(Self(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Shortest and longest scan nonce.
pub const MIN_NONCE_CHARS: usize = 16;
pub const MAX_NONCE_CHARS: usize = 200;

/// One scan's nonce, chosen by the door device (the scanner page puts a
/// fresh one in every form): sent again with a retried scan, it gets the
/// first answer back. 16–200 characters of `A-Z a-z 0-9 _ -`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ScanNonce(String);

impl ScanNonce {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let raw = raw.trim();
        let alphabet = raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'));
        if !alphabet || !(MIN_NONCE_CHARS..=MAX_NONCE_CHARS).contains(&raw.len()) {
            return Err(format!(
                "A scan nonce is {MIN_NONCE_CHARS} to {MAX_NONCE_CHARS} characters of letters, \
                 digits, - and _ (use a random UUID)."
            ));
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn generate() -> Self {
        Self(Uuid::new_v4().to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The secret of a staff (door) link: 256 random bits, base64url. Shown to
/// the organizer once; the table keeps its SHA-256 only.
#[derive(Clone, PartialEq, Eq)]
pub struct DoorSecret(String);

impl DoorSecret {
    pub fn generate() -> Self {
        let mut bytes = [0_u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        Self(URL_SAFE_NO_PAD.encode(bytes))
    }

    /// A secret from a link; `None` when it cannot be one.
    pub fn parse(raw: &str) -> Option<Self> {
        super::idempotency::is_secret_text(raw).then(|| Self(raw.to_owned()))
    }

    pub fn hash(&self) -> Vec<u8> {
        Sha256::digest(self.0.as_bytes()).to_vec()
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for DoorSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DoorSecret(..)")
    }
}

/// When a staff link works: from `from` (inclusive) until `until`
/// (exclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DoorWindow {
    pub from: OffsetDateTime,
    pub until: OffsetDateTime,
}

impl DoorWindow {
    pub fn new(from: OffsetDateTime, until: OffsetDateTime) -> Result<Self, InvalidField> {
        if until <= from {
            return Err(InvalidField::new(
                "valid_until",
                "The link must stop working after it starts.",
            ));
        }
        Ok(Self { from, until })
    }

    pub fn contains(&self, now: OffsetDateTime) -> bool {
        self.from <= now && now < self.until
    }
}

/// Why a scan was let in or not: the stable reason codes of the scanner
/// page and the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckInResult {
    /// Redeemed now: let them in.
    Ok,
    /// Redeemed before (the answer says when and at which door).
    AlreadyRedeemed,
    /// The ticket's order was cancelled.
    OrderCancelled,
    /// A ticket of another event.
    WrongEvent,
    /// No ticket has this code.
    Unknown,
}

impl CheckInResult {
    pub const ALL: [Self; 5] = [
        Self::Ok,
        Self::AlreadyRedeemed,
        Self::OrderCancelled,
        Self::WrongEvent,
        Self::Unknown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::AlreadyRedeemed => "already_redeemed",
            Self::OrderCancelled => "order_cancelled",
            Self::WrongEvent => "wrong_event",
            Self::Unknown => "unknown",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == raw)
    }

    pub fn is_ok(self) -> bool {
        self == Self::Ok
    }

    /// What the door staff read.
    pub fn sentence(self) -> &'static str {
        match self {
            Self::Ok => "Valid ticket: let them in.",
            Self::AlreadyRedeemed => "Already used.",
            Self::OrderCancelled => "The order of this ticket was cancelled.",
            Self::WrongEvent => "This ticket is for another event.",
            Self::Unknown => "No ticket has this code.",
        }
    }
}

/// Where the check-in list goes on: after this redemption (its
/// transaction's id, then the ticket's id). Encoded `SEQ.UUID`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckInCursor {
    pub seq: i64,
    pub ticket_id: Uuid,
}

impl CheckInCursor {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let bad = || "This cursor is not one a check-in list handed out.".to_owned();
        let (seq, id) = raw.trim().split_once('.').ok_or_else(bad)?;
        let seq: i64 = seq.parse().map_err(|_| bad())?;
        let ticket_id = Uuid::parse_str(id).map_err(|_| bad())?;
        if seq < 0 {
            return Err(bad());
        }
        Ok(Self { seq, ticket_id })
    }

    pub fn encode(&self) -> String {
        format!("{}.{}", self.seq, self.ticket_id.simple())
    }
}

/// Rows per page of the API's ticket search and check-in list, unless the
/// caller asks for fewer (`limit`), and the most it may ask for.
pub const CHECK_INS_PER_PAGE: i64 = 100;
pub const MAX_CHECK_INS_PER_PAGE: i64 = 500;

/// A `limit` query parameter: 1 to [`MAX_CHECK_INS_PER_PAGE`], default
/// [`CHECK_INS_PER_PAGE`].
pub fn page_limit(raw: Option<&str>) -> Result<i64, InvalidField> {
    let Some(raw) = raw else {
        return Ok(CHECK_INS_PER_PAGE);
    };
    match raw.trim().parse::<i64>() {
        Ok(n) if (1..=MAX_CHECK_INS_PER_PAGE).contains(&n) => Ok(n),
        _ => Err(InvalidField::new(
            "limit",
            format!("Give a limit from 1 to {MAX_CHECK_INS_PER_PAGE}."),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_lose_spaces_and_dashes_and_gain_capitals() {
        assert_eq!(
            TicketCode::parse(" ab12 cd-34\n").unwrap().as_str(),
            "AB12CD34"
        );
        assert!(TicketCode::parse(" - ").is_err());
        assert!(TicketCode::parse("AB%12").is_err());
        assert!(TicketCode::parse("é1").is_err());
        assert!(TicketCode::parse(&"A".repeat(MAX_CODE_CHARS)).is_ok());
        assert!(TicketCode::parse(&"A".repeat(MAX_CODE_CHARS + 1)).is_err());
        assert!(TicketCode::parse_prefix("abc").is_err());
        assert_eq!(TicketCode::parse_prefix("ab c-d").unwrap().as_str(), "ABCD");
    }

    #[test]
    fn door_names_are_one_trimmed_line() {
        assert_eq!(
            DoorName::parse("  North gate ").unwrap().as_str(),
            "North gate"
        );
        assert!(DoorName::parse("   ").is_err());
        assert!(DoorName::parse("a\nb").is_err());
        assert!(DoorName::parse(&"ö".repeat(MAX_DOOR_CHARS)).is_ok());
        assert!(DoorName::parse(&"ö".repeat(MAX_DOOR_CHARS + 1)).is_err());
    }

    #[test]
    fn nonces_are_long_and_plain() {
        assert!(ScanNonce::parse(ScanNonce::generate().as_str()).is_ok());
        assert!(ScanNonce::parse(&"a".repeat(MIN_NONCE_CHARS - 1)).is_err());
        assert!(ScanNonce::parse(&"a".repeat(MIN_NONCE_CHARS)).is_ok());
        assert!(ScanNonce::parse(&"a".repeat(MAX_NONCE_CHARS)).is_ok());
        assert!(ScanNonce::parse(&"a".repeat(MAX_NONCE_CHARS + 1)).is_err());
        assert!(ScanNonce::parse("aaaaaaaaaaaaaaa/a").is_err());
    }

    #[test]
    fn door_secrets_round_trip_and_hash() {
        let secret = DoorSecret::generate();
        let again = DoorSecret::parse(secret.as_str()).unwrap();
        assert_eq!(again.hash(), secret.hash());
        assert_eq!(secret.hash().len(), 32);
        assert!(DoorSecret::parse("short").is_none());
        assert!(DoorSecret::parse(&"+".repeat(super::super::idempotency::SECRET_CHARS)).is_none());
        assert_ne!(DoorSecret::generate().as_str(), secret.as_str());
    }

    #[test]
    fn a_window_holds_its_start_but_not_its_end() {
        let from = OffsetDateTime::UNIX_EPOCH;
        let until = from + time::Duration::hours(1);
        let window = DoorWindow::new(from, until).unwrap();
        assert!(window.contains(from));
        assert!(!window.contains(until));
        assert!(!window.contains(from - time::Duration::seconds(1)));
        assert_eq!(
            DoorWindow::new(until, until).unwrap_err().field,
            "valid_until"
        );
    }

    #[test]
    fn reasons_and_cursors_round_trip() {
        for result in CheckInResult::ALL {
            assert_eq!(CheckInResult::parse(result.as_str()), Some(result));
            assert_eq!(result.is_ok(), result == CheckInResult::Ok);
        }
        assert_eq!(CheckInResult::parse("nope"), None);
        let cursor = CheckInCursor {
            seq: 42,
            ticket_id: Uuid::new_v4(),
        };
        assert_eq!(CheckInCursor::parse(&cursor.encode()), Ok(cursor));
        for bad in ["", "42", "x.y", "-1.00000000000000000000000000000000"] {
            assert!(CheckInCursor::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn limits_default_and_stay_in_range() {
        assert_eq!(page_limit(None), Ok(CHECK_INS_PER_PAGE));
        assert_eq!(page_limit(Some("1")), Ok(1));
        assert_eq!(page_limit(Some("500")), Ok(500));
        for bad in ["0", "501", "x", ""] {
            assert_eq!(page_limit(Some(bad)).unwrap_err().field, "limit");
        }
    }
}
