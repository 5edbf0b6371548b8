/// Hard upper bound on tickets in one order, whatever a ticket type allows.
pub const MAX_QUANTITY: i32 = 100;

/// How many tickets one order asks for: 1..=MAX_QUANTITY.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Quantity(i32);

impl Quantity {
    pub fn new(n: i64) -> Result<Self, String> {
        if n < 1 {
            return Err("Choose at least 1 ticket.".into());
        }
        if n > i64::from(MAX_QUANTITY) {
            return Err(format!("At most {MAX_QUANTITY} tickets fit in one order."));
        }
        Ok(Self(n as i32))
    }

    /// Parse form text: a whole number, nothing else.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Err("Choose how many tickets you want.".into());
        }
        match raw.parse::<i64>() {
            Ok(n) => Self::new(n),
            // Digits that overflow i64 are simply too many tickets.
            Err(_) if raw.bytes().all(|b| b.is_ascii_digit()) => Self::new(i64::MAX),
            Err(_) => Err(format!("\"{raw}\" is not a whole number of tickets.")),
        }
    }

    pub fn get(self) -> i32 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_allowed_range() {
        assert_eq!(Quantity::parse("1").unwrap().get(), 1);
        assert_eq!(Quantity::parse(" 4 ").unwrap().get(), 4);
        assert_eq!(
            Quantity::new(MAX_QUANTITY.into()).unwrap().get(),
            MAX_QUANTITY
        );
    }

    #[test]
    fn refuses_zero_negative_huge_and_text() {
        for raw in [
            "0",
            "-1",
            "101",
            "99999999999999999999999",
            "two",
            "1.5",
            "",
            "1e3",
        ] {
            assert!(Quantity::parse(raw).is_err(), "{raw:?} should be refused");
        }
    }

    #[test]
    fn says_why_a_quantity_is_refused() {
        // Digits beyond i64 are too many tickets, not a malformed number.
        assert_eq!(
            Quantity::parse("99999999999999999999999"),
            Err(format!("At most {MAX_QUANTITY} tickets fit in one order."))
        );
        assert_eq!(
            Quantity::parse("1e3"),
            Err("\"1e3\" is not a whole number of tickets.".to_owned())
        );
    }
}
