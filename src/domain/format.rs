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
}
