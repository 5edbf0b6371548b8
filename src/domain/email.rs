use std::fmt;

use super::mail_domain::{deliverable, plain_domain};

/// A buyer's email, normalised (trimmed, lower-cased) so that per-buyer
/// limits and idempotency keys cannot be dodged by changing case or spacing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Email(String);

/// The longest address (RFC 5321's path limit, less the brackets).
const MAX_LEN: usize = 254;

impl Email {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let trimmed = raw.trim();
        // Most addresses are ASCII: lower-cased without Unicode's tables.
        let normalised = if trimmed.is_ascii() {
            trimmed.to_ascii_lowercase()
        } else {
            trimmed.to_lowercase()
        };
        Self::check(normalised, trimmed)
    }

    /// [`Self::parse`] of an owned input, kept without a copy (and checked
    /// in one pass) when it has the plain shape, which is lower case and
    /// trimmed already (a JSON body's address, once per purchase).
    pub fn from_input(raw: String) -> Result<Self, String> {
        if raw.len() <= MAX_LEN && plainly_valid(&raw) {
            return Ok(Self(raw));
        }
        Self::parse(&raw)
    }

    /// `normalised` checked. Errors quote `input`, the address as given
    /// (trimmed).
    fn check(normalised: String, input: &str) -> Result<Self, String> {
        // The plain shape has nothing the checks below refuse.
        if normalised.len() <= MAX_LEN && plainly_valid(&normalised) {
            return Ok(Self(normalised));
        }
        if normalised.is_empty() {
            return Err("Enter your email address.".into());
        }
        // A zero-width space or a soft hyphen makes a second address that
        // looks like the first: refused rather than folded away. (Of ASCII,
        // only the control characters are invisible.)
        let invisible = if normalised.is_ascii() {
            normalised
                .bytes()
                .find(u8::is_ascii_control)
                .map(char::from)
        } else {
            normalised.chars().find(|&c| is_invisible(c))
        };
        if let Some(c) = invisible {
            return Err(format!(
                "Remove the invisible character U+{:04X} from the email address.",
                u32::from(c)
            ));
        }
        if normalised.len() > MAX_LEN {
            return Err("That email address is too long.".into());
        }
        if !valid_by_rfc(&normalised) || !deliverable_domain(&normalised) {
            return Err(format!("\"{input}\" is not a valid email address."));
        }
        Ok(Self(normalised))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The crate checks RFC 5322 syntax. Display text ("Ada <a@x.org>") and
/// domain literals are refused: they would let one mailbox pose as many
/// buyers. We also require a dotted domain, since tickets are delivered
/// over the public internet.
fn valid_by_rfc(normalised: &str) -> bool {
    let strict = email_address::Options::default()
        .without_display_text()
        .without_domain_literal();
    email_address::EmailAddress::parse_with_options(normalised, strict).is_ok()
        && !normalised.contains(['<', '>', '[', ']', '"', ' '])
        && normalised
            .rsplit_once('@')
            .is_some_and(|(_, domain)| domain.contains('.') && !domain.ends_with('.'))
}

/// The domain is a host mail can go to ([`deliverable`]).
fn deliverable_domain(normalised: &str) -> bool {
    normalised
        .rsplit_once('@')
        .is_some_and(|(_, domain)| deliverable(domain))
}

/// The common shape, checked without the crate (a rush parses one address
/// per request): a dot-atom local part of ASCII `atext` up to 64 bytes, `@`,
/// and two or more labels of `a-z`, `0-9` and inner `-`, each up to 63
/// bytes. Every address this accepts, [`valid_by_rfc`] accepts too (a test
/// holds them together); `false` only means "ask the crate".
fn plainly_valid(normalised: &str) -> bool {
    let Some((local, domain)) = normalised.split_once('@') else {
        return false;
    };
    plain_local_part(local.as_bytes()) && plain_domain(domain.as_bytes())
}

/// Dot-separated atoms of `atext`: neither first nor last a dot, no two
/// dots in a row, at most 64 bytes.
fn plain_local_part(local: &[u8]) -> bool {
    const LOCAL_MAX: usize = 64;
    if local.len() > LOCAL_MAX {
        return false;
    }
    // The start counts as just after a dot: a dot there is refused.
    let mut after_dot = true;
    for &b in local {
        if b == b'.' {
            if after_dot {
                return false;
            }
            after_dot = true;
        } else if ASCII_CLASS
            .get(usize::from(b))
            .is_some_and(|c| c & ATEXT != 0)
        {
            after_dot = false;
        } else {
            return false;
        }
    }
    !after_dot
}

/// [`ASCII_CLASS`]'s bit for `atext` of RFC 5322 (lower case only:
/// addresses are lower-cased first).
const ATEXT: u8 = 1;

static ASCII_CLASS: [u8; 128] = {
    let mut class = [0u8; 128];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            class[b] = ATEXT;
        }
        b += 1;
    }
    let symbols = b"!#$%&'*+-/=?^_`{|}~";
    let mut i = 0;
    while i < symbols.len() {
        class[symbols[i] as usize] = ATEXT;
        i += 1;
    }
    class
};

impl fmt::Display for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Characters that show as nothing (or only change the direction of what
/// follows): a second address that looks the same as the first. Email
/// addresses with any of them are refused.
pub fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}'                  // soft hyphen
        | '\u{034F}'                // combining grapheme joiner
        | '\u{061C}'                // Arabic letter mark
        | '\u{115F}' | '\u{1160}'   // Hangul fillers
        | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}'   // Mongolian variation selectors, vowel separator
        | '\u{200B}'..='\u{200F}'   // zero-width space, non-joiner, joiner; LRM, RLM
        | '\u{202A}'..='\u{202E}'   // bidi embeddings and overrides
        | '\u{2060}'..='\u{206F}'   // word joiner, invisible operators, bidi isolates
        | '\u{3164}'                // Hangul filler
        | '\u{FE00}'..='\u{FE0F}'   // variation selectors
        | '\u{FEFF}'                // zero-width no-break space (BOM)
        | '\u{FFA0}'                // halfwidth Hangul filler
        | '\u{FFF0}'..='\u{FFF8}'
        | '\u{1BCA0}'..='\u{1BCA3}' // shorthand format controls
        | '\u{1D173}'..='\u{1D17A}' // musical format controls
        | '\u{E0000}'..='\u{E0FFF}' // tags, variation selectors supplement
    ) || c.is_control()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invisible_characters_are_recognised() {
        for c in [
            '\u{200B}',
            '\u{200C}',
            '\u{200D}',
            '\u{00AD}',
            '\u{202E}',
            '\u{2066}',
            '\u{FEFF}',
            '\u{2060}',
            '\u{E0041}',
            '\u{0}',
        ] {
            assert!(is_invisible(c), "U+{:04X}", u32::from(c));
        }
        for c in ['a', 'é', 'а', '+', '.', '-'] {
            assert!(!is_invisible(c), "{c}");
        }
    }

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
            // An address, not a host name; no host has an underscore.
            "v@1.2",
            "v@10.0.0.1",
            "v@a_b.c",
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

    /// An owned input gives what the borrowed one gives, copied or not.
    #[test]
    fn from_input_is_parse() {
        for raw in [
            "ada@example.org",
            " Ada@Example.ORG ",
            "ADA@EXAMPLE.ORG",
            "ada@example",
            "a b@example.org",
            "",
            "  ",
            "ad\u{200B}a@example.org",
            "ada\t@example.org",
            "r\u{e9}ne@example.org",
            "\"quoted\"@example.org",
        ] {
            assert_eq!(
                Email::from_input(raw.to_owned()),
                Email::parse(raw),
                "{raw:?}"
            );
        }
    }

    #[test]
    fn displays_as_the_normalised_address() {
        let email = Email::parse(" Ada@Example.org").unwrap();
        assert_eq!(email.to_string(), "ada@example.org");
    }

    /// The fast path never takes an address the crate's check refuses, and
    /// it takes the usual ones. Strings are drawn from an alphabet dense in
    /// the characters that matter (dots, `@`, `-`, `atext` symbols, space,
    /// brackets, a non-ASCII letter), 200,000 of them; labels of up to 70
    /// characters, so that the length limits are crossed too.
    #[test]
    fn the_fast_path_takes_nothing_the_crate_refuses() {
        let alphabet: Vec<char> = "ab0z9.-_+!{|'\"<>[] é@".chars().collect();
        let domain_alphabet: Vec<char> = "ab09-_é".chars().collect();
        let atext: Vec<char> = "ab0z9-_+!{|'".chars().collect();
        let label: Vec<char> = "ab09-".chars().collect();
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = |bound: usize| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) as usize % bound
        };
        let mut taken = 0;
        for _ in 0..200_000 {
            // Mostly "local@domain", each side drawn, so that many pass.
            // One to four parts joined by dots; a part may be empty.
            let mut draw = |full: &[char], allowed: &[char]| -> String {
                // Half the time from the characters that side allows.
                let alphabet = if next(2) == 0 { full } else { allowed };
                let parts: Vec<String> = (0..1 + next(4))
                    .map(|_| {
                        let len = if next(8) == 0 { next(71) } else { next(9) };
                        (0..len).map(|_| alphabet[next(alphabet.len())]).collect()
                    })
                    .collect();
                parts.join(".")
            };
            let local = draw(&alphabet, &atext);
            let domain = draw(&domain_alphabet, &label);
            let candidate = format!("{local}@{domain}");
            if plainly_valid(&candidate) {
                taken += 1;
                assert!(valid_by_rfc(&candidate), "{candidate:?}");
            }
        }
        assert!(
            taken > 2_000,
            "only {taken} drawn strings took the fast path"
        );
        for usual in [
            "ada@example.org",
            "jane.doe+x@mail.example.co.uk",
            "a1@b-c.de",
        ] {
            assert!(plainly_valid(usual) && valid_by_rfc(usual), "{usual}");
        }
        // Long labels and local parts go to the crate, which refuses them too.
        let long_local = format!("{}@example.org", "a".repeat(65));
        let long_label = format!("ada@{}.org", "b".repeat(64));
        for refused in [
            long_local.as_str(),
            long_label.as_str(),
            "ada@-x.org",
            "a..b@x.org",
        ] {
            assert!(
                !plainly_valid(refused) && !valid_by_rfc(refused),
                "{refused}"
            );
        }
    }

    #[test]
    fn the_domain_must_have_a_dot_inside() {
        for raw in ["ada@example.org.", "ada@localhost"] {
            assert!(Email::parse(raw).is_err(), "{raw:?}");
        }
        assert!(Email::parse("ada@mail.example.org").is_ok());
    }
}
