//! Each event's own time: its IANA time zone, the local times organizers
//! type in it, and the times buyers read in it.
//!
//! Postgres keeps instants (`timestamptz`); only forms and words are local.
//! A local time that the zone skips (the hour the clocks go forward) or
//! repeats (the hour they go back) is refused with a sentence saying so:
//! guessing would open a sale an hour early or late.

use jiff::{
    Timestamp,
    civil::DateTime,
    tz::{AmbiguousOffset, TimeZone},
};
use time::{OffsetDateTime, format_description::well_known::Rfc3339};

/// An IANA time zone, by its canonical name ("Europe/Berlin").
#[derive(Clone, Debug)]
pub struct Zone {
    name: String,
    tz: TimeZone,
}

impl PartialEq for Zone {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Zone {
    pub fn utc() -> Self {
        Self {
            name: "UTC".to_owned(),
            tz: TimeZone::UTC,
        }
    }

    /// A zone from the database compiled into the binary, by its name in
    /// any letter case; the stored name is the database's spelling.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Err("Choose a time zone, such as Europe/Berlin.".to_owned());
        }
        let tz = jiff::tz::db()
            .get(raw)
            .map_err(|_| format!("\"{raw}\" is not a time zone; use a name such as Europe/Berlin or America/New_York."))?;
        let name = tz.iana_name().unwrap_or(raw).to_owned();
        Ok(Self { name, tz })
    }

    /// A stored name; UTC if the database no longer knows it (a zone is
    /// never removed from it, only linked, so this is a safety net).
    pub fn stored(name: &str) -> Self {
        Self::parse(name).unwrap_or_else(|_| Self::utc())
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn tz(&self) -> &TimeZone {
        &self.tz
    }

    /// "Sat 10 Jul 2027, 19:30 CEST": the local time with the zone's
    /// abbreviation (or its offset, where the zone has none, as "-03").
    pub fn format(&self, at: OffsetDateTime) -> String {
        self.zoned(at)
            .map(|zoned| zoned.strftime("%a %-d %b %Y, %H:%M %Z").to_string())
            .unwrap_or_else(|| at.to_string())
    }

    /// A spreadsheet's cell: RFC 9557, the instant with its offset and
    /// zone, "2027-07-10T19:30:00+02:00[Europe/Berlin]".
    pub fn format_csv(&self, at: OffsetDateTime) -> String {
        self.zoned(at)
            .map(|zoned| {
                zoned.strftime("%Y-%m-%dT%H:%M:%S%.f%:z").to_string() + "[" + &self.name + "]"
            })
            .unwrap_or_default()
    }

    /// The value of a `datetime-local` input: "2027-07-10T19:30".
    pub fn input_value(&self, at: OffsetDateTime) -> String {
        self.zoned(at)
            .map(|zoned| zoned.strftime("%Y-%m-%dT%H:%M").to_string())
            .unwrap_or_default()
    }

    fn zoned(&self, at: OffsetDateTime) -> Option<jiff::Zoned> {
        let ts = Timestamp::from_nanosecond(at.unix_timestamp_nanos()).ok()?;
        Some(ts.to_zoned(self.tz.clone()))
    }

    /// A date and time as typed: RFC 3339 with its offset (the API), or a
    /// local time in this zone (`2027-03-01T19:30`, the form's), which must
    /// name exactly one instant.
    pub fn parse_datetime(&self, raw: &str) -> Result<OffsetDateTime, String> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Err("This field is required.".into());
        }
        if let Ok(t) = OffsetDateTime::parse(raw, &Rfc3339) {
            return Ok(t);
        }
        let local: DateTime = raw
            .parse()
            .ok()
            .filter(|_| is_local_shape(raw))
            .ok_or_else(|| format!("\"{raw}\" is not a date and time such as 2027-03-01T19:30."))?;
        let shown = local.strftime("%Y-%m-%d %H:%M");
        let offset = match self.tz.to_ambiguous_zoned(local).offset() {
            AmbiguousOffset::Unambiguous { offset } => offset,
            AmbiguousOffset::Gap { before, after } => {
                return Err(format!(
                    "{shown} does not exist in {}: the clocks go forward that night (from UTC{before} to UTC{after}). \
                     Choose a time outside the skipped hour.",
                    self.name
                ));
            }
            AmbiguousOffset::Fold { before, after } => {
                return Err(format!(
                    "{shown} happens twice in {}: the clocks go back that night (from UTC{before} to UTC{after}). \
                     Choose a time outside the repeated hour.",
                    self.name
                ));
            }
        };
        let instant = local
            .to_zoned(TimeZone::fixed(offset))
            .map_err(|err| format!("\"{raw}\" is out of range: {err}"))?
            .timestamp();
        OffsetDateTime::from_unix_timestamp_nanos(instant.as_nanosecond())
            .map_err(|_| format!("\"{raw}\" is out of range."))
    }
}

/// `YYYY-MM-DDTHH:MM` with optional `:SS`: what a `datetime-local` input
/// sends. jiff reads more shapes (a bare date, a space); those are refused
/// so that "2027-03-01" does not silently mean midnight.
fn is_local_shape(raw: &str) -> bool {
    const SHAPE: &[u8; 19] = b"dddd-dd-ddTdd:dd:dd";
    let bytes = raw.as_bytes();
    matches!(bytes.len(), 16 | 19)
        && bytes.iter().zip(SHAPE).all(|(byte, shape)| match shape {
            b'd' => byte.is_ascii_digit(),
            other => byte == other,
        })
}

impl sqlx::Type<sqlx::Postgres> for Zone {
    fn type_info() -> sqlx::postgres::PgTypeInfo {
        <String as sqlx::Type<sqlx::Postgres>>::type_info()
    }
}

impl<'r> sqlx::Decode<'r, sqlx::Postgres> for Zone {
    fn decode(value: sqlx::postgres::PgValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        let name = <&str as sqlx::Decode<sqlx::Postgres>>::decode(value)?;
        Ok(Self::stored(name))
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    fn zone(name: &str) -> Zone {
        Zone::parse(name).unwrap()
    }

    #[test]
    fn names_are_checked_and_spelled_as_the_database_does() {
        assert_eq!(zone("europe/berlin").name(), "Europe/Berlin");
        assert_eq!(zone(" UTC ").name(), "UTC");
        assert!(
            Zone::parse("Mars/Olympus")
                .unwrap_err()
                .contains("Mars/Olympus")
        );
        assert!(Zone::parse("").is_err());
        assert_eq!(Zone::stored("Mars/Olympus"), Zone::utc());
    }

    #[test]
    fn times_read_in_the_zone_with_its_abbreviation_across_daylight_saving() {
        let berlin = zone("Europe/Berlin");
        assert_eq!(
            berlin.format(datetime!(2027-07-10 17:30 UTC)),
            "Sat 10 Jul 2027, 19:30 CEST"
        );
        assert_eq!(
            berlin.format(datetime!(2027-01-10 17:30 UTC)),
            "Sun 10 Jan 2027, 18:30 CET"
        );
        // Southern hemisphere: summer time in January.
        let sydney = zone("Australia/Sydney");
        assert_eq!(
            sydney.format(datetime!(2027-01-10 08:30 UTC)),
            "Sun 10 Jan 2027, 19:30 AEDT"
        );
        assert_eq!(
            sydney.format(datetime!(2027-07-10 09:30 UTC)),
            "Sat 10 Jul 2027, 19:30 AEST"
        );
        assert_eq!(
            Zone::utc().format(datetime!(2027-07-10 17:30 UTC)),
            "Sat 10 Jul 2027, 17:30 UTC"
        );
        assert_eq!(
            berlin.input_value(datetime!(2027-07-10 17:30 UTC)),
            "2027-07-10T19:30"
        );
        assert_eq!(
            berlin.format_csv(datetime!(2027-07-10 17:30 UTC)),
            "2027-07-10T19:30:00+02:00[Europe/Berlin]"
        );
    }

    #[test]
    fn local_times_name_one_instant_or_are_refused() {
        let berlin = zone("Europe/Berlin");
        assert_eq!(
            berlin.parse_datetime("2027-07-10T19:30"),
            Ok(datetime!(2027-07-10 17:30 UTC))
        );
        assert_eq!(
            berlin.parse_datetime("2027-07-10T19:30:15"),
            Ok(datetime!(2027-07-10 17:30:15 UTC))
        );
        // An instant with its offset is taken as it is, in any zone.
        assert_eq!(
            berlin.parse_datetime("2027-07-10T19:30:00+02:00"),
            Ok(datetime!(2027-07-10 17:30 UTC))
        );
        // 28 Mar 2027: 02:00 becomes 03:00 in Berlin; 31 Oct 03:00 becomes 02:00.
        let gap = berlin.parse_datetime("2027-03-28T02:30").unwrap_err();
        assert!(
            gap.contains("does not exist") && gap.contains("Europe/Berlin"),
            "{gap}"
        );
        let fold = berlin.parse_datetime("2027-10-31T02:30").unwrap_err();
        assert!(fold.contains("happens twice"), "{fold}");
        assert_eq!(
            berlin.parse_datetime("2027-03-28T03:00"),
            Ok(datetime!(2027-03-28 01:00 UTC))
        );
        // New York: 14 Mar 2027 02:30 is skipped, 7 Nov 01:30 repeats.
        let new_york = zone("America/New_York");
        assert!(
            new_york
                .parse_datetime("2027-03-14T02:30")
                .unwrap_err()
                .contains("does not exist")
        );
        assert!(
            new_york
                .parse_datetime("2027-11-07T01:30")
                .unwrap_err()
                .contains("happens twice")
        );
        // Sydney: clocks go forward on 3 Oct 2027 (02:00 → 03:00) and back on
        // 4 Apr 2027 (03:00 → 02:00).
        let sydney = zone("Australia/Sydney");
        assert!(
            sydney
                .parse_datetime("2027-10-03T02:30")
                .unwrap_err()
                .contains("does not exist")
        );
        assert!(
            sydney
                .parse_datetime("2027-04-04T02:30")
                .unwrap_err()
                .contains("happens twice")
        );
        assert_eq!(
            sydney.parse_datetime("2027-04-04T12:00"),
            Ok(datetime!(2027-04-04 02:00 UTC))
        );
        for bad in [
            "",
            "2027-03-01",
            "1 March",
            "2027-03-01 19:30",
            "2027-02-30T10:00",
        ] {
            assert!(berlin.parse_datetime(bad).is_err(), "{bad}");
        }
    }
}
