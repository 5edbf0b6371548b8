use std::fmt;

/// A buyer's email, normalised (trimmed, lower-cased) so that per-buyer
/// limits and idempotency keys cannot be dodged by changing case or spacing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Email(String);

impl Email {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let normalised = raw.trim().to_lowercase();
        if normalised.is_empty() {
            return Err("Enter your email address.".into());
        }
        // A zero-width space or a soft hyphen makes a second address that
        // looks like the first: refused rather than folded away.
        if let Some(c) = normalised
            .chars()
            .find(|&c| super::buyer_key::is_invisible(c))
        {
            return Err(format!(
                "Remove the invisible character U+{:04X} from the email address.",
                u32::from(c)
            ));
        }
        if normalised.len() > 254 {
            return Err("That email address is too long.".into());
        }
        // The crate checks RFC 5322 syntax. Display text ("Ada <a@x.org>")
        // and domain literals are refused: they would let one mailbox pose as
        // many buyers. We also require a dotted domain, since tickets are
        // delivered over the public internet.
        let strict = email_address::Options::default()
            .without_display_text()
            .without_domain_literal();
        let valid = email_address::EmailAddress::parse_with_options(&normalised, strict).is_ok()
            && !normalised.contains(['<', '>', '[', ']', '"', ' '])
            && normalised
                .rsplit_once('@')
                .is_some_and(|(_, domain)| domain.contains('.') && !domain.ends_with('.'));
        if !valid {
            return Err(format!("\"{}\" is not a valid email address.", raw.trim()));
        }
        Ok(Self(normalised))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_case_and_whitespace() {
        let email = Email::parse("  Ada@Example.ORG ").unwrap();
        assert_eq!(email.as_str(), "ada@example.org");
    }

    #[test]
    fn rejects_malformed_addresses() {
        for raw in [
            "",
            "   ",
            "ada",
            "ada@",
            "@example.org",
            "ada@example",
            "a b@example.org",
            "ada@@example.org",
            "x y <victim@example.org>",
            "ada <ada@example.org>",
            "victim@[1.2.3.4]",
            "\"quoted\"@example.org",
            "ad\u{200B}a@example.org",
            "ad\u{AD}a@example.org",
            "ada\u{202E}@example.org",
            "\u{FEFF}ada@example.org",
            "ada@exa\u{200D}mple.org",
        ] {
            assert!(Email::parse(raw).is_err(), "{raw:?} should be rejected");
        }
    }

    #[test]
    fn takes_254_characters_and_not_255() {
        // A 64-character local part and a domain of labels under 64.
        let address = |last_label: usize| {
            format!(
                "{}@{}.{}.{}",
                "a".repeat(64),
                "b".repeat(63),
                "c".repeat(63),
                "d".repeat(last_label)
            )
        };
        let longest = address(61);
        assert_eq!(longest.len(), 254);
        assert_eq!(Email::parse(&longest).unwrap().as_str(), longest);
        let too_long = address(62);
        assert_eq!(too_long.len(), 255);
        assert_eq!(
            Email::parse(&too_long),
            Err("That email address is too long.".to_owned())
        );
    }

    #[test]
    fn displays_as_the_normalised_address() {
        let email = Email::parse(" Ada@Example.org").unwrap();
        assert_eq!(email.to_string(), "ada@example.org");
    }

    #[test]
    fn the_domain_must_have_a_dot_inside() {
        for raw in ["ada@example.org.", "ada@localhost"] {
            assert!(Email::parse(raw).is_err(), "{raw:?}");
        }
        assert!(Email::parse("ada@mail.example.org").is_ok());
    }
}
