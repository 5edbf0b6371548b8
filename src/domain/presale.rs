//! Presale codes: what a buyer types (or a link carries), and what an
//! organizer asks for when creating them.

use rand::Rng as _;
use time::OffsetDateTime;

use super::{ForField as _, InvalidField, TicketTypeId, Zone};

/// Codes made in one request at most.
pub const MAX_CODES_PER_BATCH: i64 = 1000;
/// Tickets one code may be used for at most.
pub const MAX_CODE_USES: i64 = 100_000;
const MIN_CODE_CHARS: usize = 4;
const MAX_CODE_CHARS: usize = 40;
/// Generated codes: no 0/O, 1/I/L to misread.
const ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";
const GENERATED_CHARS: usize = 10;

/// A presale code: 4 to 40 letters, digits and dashes, compared in upper
/// case (a buyer may type it in any case, with spaces around).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PresaleCode(String);

impl PresaleCode {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let code = raw.trim().to_ascii_uppercase();
        let ok = (MIN_CODE_CHARS..=MAX_CODE_CHARS).contains(&code.len())
            && code
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'-');
        if ok {
            Ok(Self(code))
        } else {
            Err(format!(
                "A presale code is {MIN_CODE_CHARS} to {MAX_CODE_CHARS} letters, digits or dashes."
            ))
        }
    }

    /// A random code of 10 characters (about 50 bits).
    pub fn generate() -> Self {
        let mut rng = rand::rng();
        Self(
            (0..GENERATED_CHARS)
                .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
                .collect(),
        )
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The optional code of a purchase: blank is none.
pub fn optional_code(raw: &str) -> Result<Option<PresaleCode>, InvalidField> {
    match raw.trim() {
        "" => Ok(None),
        raw => PresaleCode::parse(raw).map(Some).for_field("presale_code"),
    }
}

/// Codes to create, as typed on the page or sent to the API.
#[derive(Debug, Clone, Default)]
pub struct CodeInput {
    /// One code as chosen by the organizer; blank: `count` random ones.
    pub code: String,
    pub count: String,
    pub max_uses: String,
    pub valid_from: String,
    pub valid_until: String,
    pub ticket_type_ids: Vec<String>,
}

/// Codes ready to write.
#[derive(Debug, Clone)]
pub struct NewCodes {
    pub codes: Vec<PresaleCode>,
    pub max_uses: i32,
    pub valid_from: Option<OffsetDateTime>,
    pub valid_until: Option<OffsetDateTime>,
    pub ticket_type_ids: Vec<TicketTypeId>,
}

impl CodeInput {
    /// Checked, with local times read in the event's zone.
    pub fn parse(&self, zone: &Zone) -> Result<NewCodes, InvalidField> {
        let count = match self.count.trim() {
            "" => 1,
            raw => whole(raw, 1, MAX_CODES_PER_BATCH).for_field("count")?,
        };
        let codes = match self.code.trim() {
            "" => (0..count).map(|_| PresaleCode::generate()).collect(),
            raw if count == 1 => vec![PresaleCode::parse(raw).for_field("code")?],
            _ => {
                return Err(InvalidField::new(
                    "count",
                    "Give either one code of your own or a number of codes to generate.",
                ));
            }
        };
        let max_uses = whole(self.max_uses.trim(), 1, MAX_CODE_USES).for_field("max_uses")? as i32;
        let when = |raw: &str, field: &str| match raw.trim() {
            "" => Ok(None),
            raw => zone.parse_datetime(raw).map(Some).for_field(field),
        };
        let valid_from = when(&self.valid_from, "valid_from")?;
        let valid_until = when(&self.valid_until, "valid_until")?;
        if let (Some(from), Some(until)) = (valid_from, valid_until)
            && until <= from
        {
            return Err(InvalidField::new(
                "valid_until",
                "A code's window must end after it starts.",
            ));
        }
        let mut ticket_type_ids = Vec::new();
        for raw in &self.ticket_type_ids {
            let id = TicketTypeId::parse(raw.trim()).ok_or_else(|| {
                InvalidField::new("ticket_type_ids", "Choose ticket types of this event.")
            })?;
            if !ticket_type_ids.contains(&id) {
                ticket_type_ids.push(id);
            }
        }
        if ticket_type_ids.is_empty() {
            return Err(InvalidField::new(
                "ticket_type_ids",
                "Choose the ticket types the code unlocks.",
            ));
        }
        Ok(NewCodes {
            codes,
            max_uses,
            valid_from,
            valid_until,
            ticket_type_ids,
        })
    }
}

fn whole(raw: &str, min: i64, max: i64) -> Result<i64, String> {
    raw.parse::<i64>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| format!("A whole number from {min} to {max}."))
}

/// Whether a code's window contains `now`.
pub fn code_is_current(
    valid_from: Option<OffsetDateTime>,
    valid_until: Option<OffsetDateTime>,
    now: OffsetDateTime,
) -> bool {
    valid_from.is_none_or(|from| now >= from) && valid_until.is_none_or(|until| now < until)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> CodeInput {
        CodeInput {
            max_uses: "10".into(),
            ticket_type_ids: vec![uuid::Uuid::new_v4().to_string()],
            ..CodeInput::default()
        }
    }

    #[test]
    fn codes_are_compared_in_upper_case_and_refuse_odd_characters() {
        assert_eq!(
            PresaleCode::parse(" fan-club-7 ").unwrap().as_str(),
            "FAN-CLUB-7"
        );
        for bad in [
            "",
            "abc",
            "with space",
            "ÄBCD",
            "x".repeat(41).as_str(),
            "AB_CD",
        ] {
            assert!(PresaleCode::parse(bad).is_err(), "{bad:?}");
        }
        assert!(PresaleCode::parse(&"x".repeat(40)).is_ok());
        let generated = PresaleCode::generate();
        assert_eq!(generated.as_str().len(), 10);
        assert_eq!(PresaleCode::parse(generated.as_str()), Ok(generated));
        assert_eq!(optional_code("  ").unwrap(), None);
        assert_eq!(optional_code("a b").unwrap_err().field, "presale_code");
    }

    #[test]
    fn one_chosen_code_or_many_generated_ones() {
        let mut one = input();
        one.code = "fans".into();
        let parsed = one.parse(&Zone::utc()).unwrap();
        assert_eq!(parsed.codes, [PresaleCode::parse("FANS").unwrap()]);
        assert_eq!(parsed.max_uses, 10);
        let mut many = input();
        many.count = "25".into();
        let parsed = many.parse(&Zone::utc()).unwrap();
        assert_eq!(parsed.codes.len(), 25);
        let mut both = input();
        both.code = "fans".into();
        both.count = "2".into();
        assert_eq!(both.parse(&Zone::utc()).unwrap_err().field, "count");
        for (field, set) in [
            (
                "count",
                (|i: &mut CodeInput| i.count = "1001".into()) as fn(&mut CodeInput),
            ),
            ("count", |i| i.count = "0".into()),
            ("max_uses", |i| i.max_uses = "0".into()),
            ("max_uses", |i| i.max_uses = "".into()),
            ("code", |i| i.code = "a b".into()),
            ("valid_from", |i| i.valid_from = "soon".into()),
            ("ticket_type_ids", |i| i.ticket_type_ids = vec![]),
            ("ticket_type_ids", |i| {
                i.ticket_type_ids = vec!["nope".into()]
            }),
        ] {
            let mut bad = input();
            set(&mut bad);
            assert_eq!(bad.parse(&Zone::utc()).unwrap_err().field, field);
        }
        let mut window = input();
        window.valid_from = "2027-01-02T10:00".into();
        window.valid_until = "2027-01-01T10:00".into();
        assert_eq!(window.parse(&Zone::utc()).unwrap_err().field, "valid_until");
    }

    #[test]
    fn a_window_includes_its_start_and_excludes_its_end() {
        let t = OffsetDateTime::UNIX_EPOCH;
        let s = time::Duration::seconds(1);
        assert!(code_is_current(None, None, t));
        assert!(code_is_current(Some(t), Some(t + s), t));
        assert!(!code_is_current(Some(t + s), None, t));
        assert!(!code_is_current(None, Some(t), t));
    }
}

/// Fewer guesses than this (by zxcvbn's estimate: dictionary words, names,
/// dates, keyboard patterns) and a code is called guessable. With the code
/// guard (a few failed checks per address and event, then waits doubling up
/// to an hour), 10^9 guesses take tens of millions of address-days; a
/// generated code is about 10^10 by the same estimate.
const GUESSABLE_BELOW_LOG10: f64 = 9.0;

/// Whether a code could be found by guessing: short, or built of words,
/// dates and patterns a guesser tries first (`FANCLUB-2027`).
pub fn is_guessable(code: &str) -> bool {
    // The generated shape (10 of our 31 characters) is taken as random, and
    // skips the estimate (about a millisecond a code).
    let generated = code.len() == GENERATED_CHARS && code.bytes().all(|b| ALPHABET.contains(&b));
    !generated && zxcvbn::zxcvbn(code, &[]).guesses_log10() < GUESSABLE_BELOW_LOG10
}

#[cfg(test)]
mod strength_tests {
    use super::*;

    #[test]
    fn words_dates_and_short_codes_are_guessable_and_random_ones_are_not() {
        for weak in [
            "FANCLUB-2027",
            "VIP-ROOM",
            "PRESALE",
            "ABCD",
            "SUMMER-2026",
            "12345678",
        ] {
            assert!(is_guessable(weak), "{weak}");
        }
        // Two generated codes, and a long one of the organizer's own.
        for strong in ["K7MQ2XRP9D", "W4TNB8HQ3Z", "FRONT-ROW-7Q2X"] {
            assert!(!is_guessable(strong), "{strong}");
        }
    }
}
