//! How prices and times read on pages and in messages.

use time::{OffsetDateTime, UtcOffset, macros::format_description};

/// Render minor units as "12.50 EUR", or "Free".
pub fn format_price(minor: i64, currency: &str) -> String {
    if minor == 0 {
        "Free".into()
    } else {
        format!("{} {currency}", decimal_price(minor, currency))
    }
}

/// Decimal places of a currency's minor unit, as ISO 4217 and Stripe count
/// them: none for the yen, the won and the other zero-decimal currencies,
/// three for the dinars and rials that have them, else two.
pub fn minor_digits(currency: &str) -> u32 {
    const ZERO: [&str; 16] = [
        "BIF", "CLP", "DJF", "GNF", "JPY", "KMF", "KRW", "MGA", "PYG", "RWF", "UGX", "VND", "VUV",
        "XAF", "XOF", "XPF",
    ];
    const THREE: [&str; 5] = ["BHD", "JOD", "KWD", "OMR", "TND"];
    if ZERO.contains(&currency) {
        0
    } else if THREE.contains(&currency) {
        3
    } else {
        2
    }
}

/// Minor units as the organizer form shows them: "12.50" (EUR), "2500"
/// (JPY), "25.500" (KWD).
pub fn decimal_price(minor: i64, currency: &str) -> String {
    let digits = minor_digits(currency);
    if digits == 0 {
        return minor.to_string();
    }
    let unit = 10_i64.pow(digits);
    let width = digits as usize;
    format!("{}.{:0width$}", minor / unit, minor % unit)
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
        assert_eq!(decimal_price(1250, "EUR"), "12.50");
        assert_eq!(decimal_price(7, "EUR"), "0.07");
        assert_eq!(decimal_price(0, "EUR"), "0.00");
        assert_eq!(decimal_price(1999, "EUR"), "19.99");
        assert_eq!(decimal_price(2500, "JPY"), "2500");
        assert_eq!(decimal_price(25_500, "KWD"), "25.500");
        assert_eq!(decimal_price(7, "KWD"), "0.007");
        assert_eq!(format_price(2500, "JPY"), "2500 JPY");
        assert_eq!(format_price(25_500, "KWD"), "25.500 KWD");
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
