//! The domain of a buyer's email: a host name mail can be delivered to,
//! and one spelling of it for the per-buyer limits (an internationalised
//! domain and its punycode form are one domain).

use std::borrow::Cow;

/// Whether `domain` (lower case) names a host mail can go to: two or more
/// labels of letters, digits and inner hyphens (an internationalised
/// domain as its punycode, by UTS 46), the last not all digits. So
/// `v@1.2` (an address, not a name) and `v@a_b.c` (no host has an
/// underscore) are refused.
pub(super) fn deliverable(domain: &str) -> bool {
    let ascii = if domain.is_ascii() {
        Cow::Borrowed(domain)
    } else {
        match idna::domain_to_ascii(domain) {
            Ok(ascii) => Cow::Owned(ascii),
            Err(_) => return false,
        }
    };
    plain_domain(ascii.as_bytes())
}

/// Two or more labels of `a-z`, `0-9` and `-`, each starting and ending
/// with a letter or digit, at most 63 bytes; the last one not all digits.
pub(super) fn plain_domain(domain: &[u8]) -> bool {
    const LABEL_MAX: usize = 63;
    let mut dots = 0;
    let mut label_len = 0;
    let mut label_digits_only = true;
    let mut previous = b'.';
    for &b in domain {
        if b == b'.' {
            // Also refuses an empty label (the previous byte a dot).
            if !is_let_dig(previous) {
                return false;
            }
            dots += 1;
            label_len = 0;
            label_digits_only = true;
        } else if is_let_dig(b) || (b == b'-' && label_len > 0) {
            label_len += 1;
            label_digits_only &= b.is_ascii_digit();
            if label_len > LABEL_MAX {
                return false;
            }
        } else {
            return false;
        }
        previous = b;
    }
    dots > 0 && is_let_dig(previous) && !label_digits_only
}

fn is_let_dig(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// The domain as the per-buyer limits compare it, given `fold` (the buyer
/// key's fold of a part): the Unicode form folded, then back to punycode,
/// so `bücher.de`, `BÜCHER.de` and `xn--bcher-kva.de` are one domain. A
/// plain ASCII domain (nearly all) is only folded.
pub(super) fn key(domain: &str, fold: impl Fn(&str) -> String) -> String {
    if domain.is_ascii() && !domain.split('.').any(|label| label.starts_with("xn--")) {
        return fold(domain);
    }
    let (unicode, _) = idna::domain_to_unicode(domain);
    let folded = fold(&unicode);
    idna::domain_to_ascii(&folded).unwrap_or(folded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_mail_can_go_to_and_others() {
        for ok in [
            "example.org",
            "mail.example.co.uk",
            "x1.io",
            "a-b.example",
            "bücher.de",
        ] {
            assert!(deliverable(ok), "{ok}");
        }
        for bad in [
            "1.2",
            "10.0.0.1",
            "a_b.c",
            "example",
            "-a.org",
            "a-.org",
            "a..org",
            "bü_cher.de",
        ] {
            assert!(!deliverable(bad), "{bad}");
        }
    }

    #[test]
    fn an_idn_and_its_punycode_are_one_key() {
        let fold = str::to_lowercase;
        assert_eq!(key("bücher.de", fold), "xn--bcher-kva.de");
        assert_eq!(key("xn--bcher-kva.de", fold), "xn--bcher-kva.de");
        assert_eq!(key("example.org", fold), "example.org");
    }
}
