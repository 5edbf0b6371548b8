use std::fmt;

use super::format_price;

/// ISO 4217 code, three upper-case letters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Currency(String);

impl Currency {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let code = raw.trim().to_uppercase();
        if code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase()) {
            Ok(Self(code))
        } else {
            Err(format!(
                "\"{}\" is not a three-letter currency code such as EUR.",
                raw.trim()
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A price in minor units: cents, or yen (no decimals), or fils (three);
/// see [`super::format::minor_digits`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Money {
    pub minor: i64,
    pub currency: Currency,
}

/// Upper bound on a ticket price: 1,000,000.00.
const MAX_MINOR: i64 = 100_000_000;

impl Money {
    pub fn from_minor(minor: i64, currency: Currency) -> Result<Self, String> {
        if minor < 0 {
            return Err("A price cannot be negative.".into());
        }
        if minor > MAX_MINOR {
            return Err("That price is above the 1,000,000.00 limit.".into());
        }
        Ok(Self { minor, currency })
    }

    /// Parse "12", "12.5" or "12.50" (form input) into minor units.
    pub fn parse_decimal(raw: &str, currency: Currency) -> Result<Self, String> {
        let raw = raw.trim();
        let bad = || format!("\"{raw}\" is not a price such as 12.50.");
        let digits = super::format::minor_digits(currency.as_str());
        let (whole, frac) = raw.split_once('.').unwrap_or((raw, ""));
        if digits == 0 && raw.contains('.') {
            return Err(format!(
                "\"{raw}\" is not a price in {}, which has no decimals.",
                currency.as_str()
            ));
        }
        if whole.is_empty()
            || whole.len() > 9
            || frac.len() > digits as usize
            || !whole.bytes().all(|b| b.is_ascii_digit())
            || !frac.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(bad());
        }
        let whole: i64 = whole.parse().map_err(|_| bad())?;
        let unit = 10_i64.pow(digits);
        let frac: i64 = if digits == 0 {
            0
        } else {
            format!("{frac:0<width$}", width = digits as usize)
                .parse()
                .map_err(|_| bad())?
        };
        Self::from_minor(whole * unit + frac, currency)
    }
}

impl fmt::Display for Money {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_price(self.minor, self.currency.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eur() -> Currency {
        Currency::parse("eur").unwrap()
    }

    #[test]
    fn parses_decimal_prices() {
        assert_eq!(Money::parse_decimal("12", eur()).unwrap().minor, 1200);
        assert_eq!(Money::parse_decimal("12.5", eur()).unwrap().minor, 1250);
        assert_eq!(Money::parse_decimal("0.07", eur()).unwrap().minor, 7);
        for raw in ["", "-1", "1.234", "abc", "1,50", ".5", "99999999999"] {
            assert!(Money::parse_decimal(raw, eur()).is_err(), "{raw:?}");
        }
    }

    #[test]
    fn zero_and_three_decimal_currencies_parse_in_their_own_minor_units() {
        let jpy = || Currency::parse("JPY").unwrap();
        let kwd = || Currency::parse("KWD").unwrap();
        assert_eq!(Money::parse_decimal("2500", jpy()).unwrap().minor, 2500);
        assert!(Money::parse_decimal("25.00", jpy()).is_err());
        assert_eq!(Money::parse_decimal("25.5", kwd()).unwrap().minor, 25_500);
        assert_eq!(Money::parse_decimal("0.007", kwd()).unwrap().minor, 7);
        assert!(Money::parse_decimal("0.0071", kwd()).is_err());
    }

    #[test]
    fn currencies_are_three_letters() {
        assert_eq!(Currency::parse(" usd ").unwrap().as_str(), "USD");
        for raw in ["", "EU", "EURO", "E1R", "E R"] {
            assert!(Currency::parse(raw).is_err(), "{raw:?}");
        }
    }

    #[test]
    fn prices_run_from_zero_to_the_limit() {
        assert_eq!(Money::from_minor(0, eur()).unwrap().minor, 0);
        assert_eq!(
            Money::from_minor(-1, eur()),
            Err("A price cannot be negative.".to_owned())
        );
        let limit = "That price is above the 1,000,000.00 limit.".to_owned();
        assert_eq!(
            Money::from_minor(100_000_000, eur()).unwrap().minor,
            100_000_000
        );
        assert_eq!(Money::from_minor(100_000_001, eur()), Err(limit.clone()));
        assert_eq!(Money::parse_decimal("0", eur()).unwrap().minor, 0);
        assert_eq!(Money::parse_decimal(" 3.05 ", eur()).unwrap().minor, 305);
        assert_eq!(
            Money::parse_decimal("1000000.00", eur()).unwrap().minor,
            100_000_000
        );
        // Nine digits are a number above the limit; ten are not a price.
        assert_eq!(Money::parse_decimal("123456789", eur()), Err(limit));
        assert_eq!(
            Money::parse_decimal("1234567890", eur()),
            Err("\"1234567890\" is not a price such as 12.50.".to_owned())
        );
        // Signs are not digits, in either part (`parse` would take them).
        for raw in ["-1", "+5", "1.+5", "1.-5"] {
            assert_eq!(
                Money::parse_decimal(raw, eur()),
                Err(format!("\"{raw}\" is not a price such as 12.50.")),
            );
        }
    }

    #[test]
    fn displays_with_its_currency() {
        let price = Money::parse_decimal("12.5", eur()).unwrap();
        assert_eq!(price.to_string(), "12.50 EUR");
    }
}
