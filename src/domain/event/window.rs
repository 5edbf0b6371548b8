//! The dates of an event and its sale window, as typed: a date-time
//! reader shared by every form and API body, and the order the dates must
//! be in.

use time::OffsetDateTime;

use crate::domain::{ForField, InvalidField, Zone};

/// The start, the sale's opening and its close (blank: at the start), each
/// checked and named by its field: the sale opens before the event starts
/// and closes after it opens, by the start.
pub(super) fn parse_dates(
    zone: &Zone,
    starts_at: &str,
    sale_opens_at: &str,
    sale_closes_at: &str,
) -> Result<(OffsetDateTime, OffsetDateTime, Option<OffsetDateTime>), InvalidField> {
    let starts_at = zone.parse_datetime(starts_at).for_field("starts_at")?;
    let sale_opens_at = zone
        .parse_datetime(sale_opens_at)
        .for_field("sale_opens_at")?;
    let sale_closes_at = match sale_closes_at.trim() {
        "" => None,
        raw => Some(zone.parse_datetime(raw).for_field("sale_closes_at")?),
    };
    if sale_opens_at >= starts_at {
        return Err(InvalidField::new(
            "sale_opens_at",
            "The sale must open before the event starts.",
        ));
    }
    if sale_closes_at.is_some_and(|closes| closes <= sale_opens_at) {
        return Err(InvalidField::new(
            "sale_closes_at",
            "The sale must close after it opens.",
        ));
    }
    // A sale past the start would reopen an event that has begun; selling
    // at the door is not a feature yet.
    if sale_closes_at.is_some_and(|closes| closes > starts_at) {
        return Err(InvalidField::new(
            "sale_closes_at",
            "The sale must close by the time the event starts (leave it blank to close at the start).",
        ));
    }
    Ok((starts_at, sale_opens_at, sale_closes_at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_times_in_rfc_3339_or_the_form_format() {
        use time::macros::datetime;
        let parse_datetime = |raw: &str| Zone::utc().parse_datetime(raw);
        assert_eq!(
            parse_datetime("2027-03-01T19:30:00+02:00"),
            Ok(datetime!(2027-03-01 17:30 UTC))
        );
        assert_eq!(
            parse_datetime(" 2027-03-01T19:30 "),
            Ok(datetime!(2027-03-01 19:30 UTC))
        );
        assert_eq!(
            parse_datetime("2027-03-01T19:30:15"),
            Ok(datetime!(2027-03-01 19:30:15 UTC))
        );
        assert_eq!(
            parse_datetime(" "),
            Err("This field is required.".to_owned())
        );
        assert_eq!(
            parse_datetime("1 March"),
            Err("\"1 March\" is not a date and time such as 2027-03-01T19:30.".to_owned())
        );
    }
}
