//! How prices and times read on pages and in messages.

use time::{OffsetDateTime, UtcOffset, macros::format_description};

/// Render minor units as "12.50 EUR", or "Free".
pub fn format_price(minor: i64, currency: &str) -> String {
    if minor == 0 {
        "Free".into()
    } else {
        format!("{}.{:02} {currency}", minor / 100, minor % 100)
    }
}

/// Minor units as the organizer form shows them: "12.50".
pub fn decimal_price(minor: i64) -> String {
    format!("{}.{:02}", minor / 100, minor % 100)
}

/// "Mon 1 Mar 2027, 19:30 UTC".
pub fn format_time(t: OffsetDateTime) -> String {
    let format = format_description!(
        "[weekday repr:short] [day padding:none] [month repr:short] [year], [hour]:[minute] UTC"
    );
    t.to_offset(UtcOffset::UTC)
        .format(format)
        .unwrap_or_else(|_| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_prices() {
        assert_eq!(format_price(1250, "EUR"), "12.50 EUR");
        assert_eq!(format_price(0, "EUR"), "Free");
    }

    #[test]
    fn formats_decimal_prices_and_small_amounts() {
        assert_eq!(format_price(7, "EUR"), "0.07 EUR");
        assert_eq!(format_price(100_000_000, "USD"), "1000000.00 USD");
        assert_eq!(decimal_price(1250), "12.50");
        assert_eq!(decimal_price(7), "0.07");
        assert_eq!(decimal_price(0), "0.00");
        assert_eq!(decimal_price(1999), "19.99");
    }

    #[test]
    fn formats_times_in_utc() {
        use time::macros::datetime;
        assert_eq!(
            format_time(datetime!(2027-03-01 19:30 +01:00)),
            "Mon 1 Mar 2027, 18:30 UTC"
        );
    }
}
