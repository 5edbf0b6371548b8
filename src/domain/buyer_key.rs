//! Who counts as one buyer for the per-buyer limits: a key folded from the
//! order's email, so that spellings of one mailbox share one limit. The
//! order keeps the email as given; only the limit uses the key.

use std::{fmt, sync::LazyLock};

use unicode_normalization::UnicodeNormalization;
use unicode_security::confusable_detection::skeleton;

use super::Email;

/// The folded email that per-buyer limits are counted on.
///
/// Folds, in order: NFKC (fullwidth letters, ligatures, composed and
/// combining accents written either way), lower case, the Unicode
/// confusables skeleton (Cyrillic `а` and Latin `a`; also `0`/`o`, `1`/`l`
/// and `m`/`rn`, so a few distinct mailboxes share a key: stricter, never
/// looser), lower case again; then in the local part everything from the
/// first `+` (sub-addressing tags), and for Gmail every dot, with
/// `googlemail.com` read as `gmail.com`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BuyerKey(String);

impl BuyerKey {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for BuyerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// [`fold_unicode`] of a part, from a table when it is ASCII (nearly every
/// address): a rush folds one key per purchase, and the full fold costs
/// tens of thousands of instructions.
fn fold(part: &str) -> String {
    let table = ascii_folds();
    let folds: Option<Vec<&str>> = part
        .bytes()
        .map(|b| table.get(usize::from(b))?.as_deref())
        .collect();
    match folds {
        Some(folds) => folds.concat(),
        None => fold_unicode(part),
    }
}

/// The fold of each ASCII character alone, where that is ASCII (`%` folds
/// to `°/₀`: `None`). For ASCII text every step of [`fold_unicode`] works
/// character by character (NFKC and NFC change nothing, the skeleton maps
/// each character to its prototype), so a part whose characters all fold to
/// ASCII folds to the join of their folds.
fn ascii_folds() -> &'static [Option<String>; 128] {
    static TABLE: LazyLock<[Option<String>; 128]> = LazyLock::new(|| {
        std::array::from_fn(|b| {
            let folded = fold_unicode(&char::from(b as u8).to_string());
            folded.is_ascii().then_some(folded)
        })
    });
    &TABLE
}

/// The keys of the two spellings of Gmail's domain.
static GMAIL_DOMAINS: LazyLock<[String; 2]> =
    LazyLock::new(|| [fold("gmail.com"), fold("googlemail.com")]);

fn fold_unicode(part: &str) -> String {
    let nfkc: String = part.nfkc().collect::<String>().to_lowercase();
    skeleton(&nfkc)
        .collect::<String>()
        .nfc()
        .collect::<String>()
        .to_lowercase()
}

impl From<&Email> for BuyerKey {
    fn from(email: &Email) -> Self {
        let raw = email.as_str();
        let (local, domain) = raw.rsplit_once('@').unwrap_or((raw, ""));
        let mut local = fold(local);
        let mut domain = super::mail_domain::key(domain, fold);
        if let Some(plus) = local.find('+') {
            local.truncate(plus);
        }
        // Compared as skeletons too (the skeleton of `m` is `rn`), so that a
        // look-alike of gmail.com is Gmail as well.
        if GMAIL_DOMAINS.contains(&domain) {
            domain = "gmail.com".to_owned();
            local.retain(|c| c != '.');
        }
        Self(format!("{local}@{domain}"))
    }
}

/// The per-buyer limits one purchase must fit, as plain data read with the
/// ticket type: what one buyer key may hold of the ticket type, and (when
/// the event sets one) of the event across its ticket types. The sale
/// transaction enforces both with conditional upserts on the holdings rows;
/// a path that already holds the ticket type's row lock may read the
/// holdings and call [`BuyerLimits::check`] instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuyerLimits {
    pub per_ticket_type: i32,
    pub per_event: Option<i32>,
}

/// Which limit a purchase would break, and that limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitBreach {
    TicketType { max: i32 },
    Event { max: i32 },
}

impl BuyerLimits {
    /// Whether a buyer key holding `held_of_type` tickets of this type and
    /// `held_in_event` in the whole event may add `adding`.
    pub fn check(
        &self,
        held_of_type: i32,
        held_in_event: i32,
        adding: i32,
    ) -> Result<(), LimitBreach> {
        let over = |held: i32, max: i32| i64::from(held) + i64::from(adding) > i64::from(max);
        if over(held_of_type, self.per_ticket_type) {
            return Err(LimitBreach::TicketType {
                max: self.per_ticket_type,
            });
        }
        match self.per_event {
            Some(max) if over(held_in_event, max) => Err(LimitBreach::Event { max }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(raw: &str) -> String {
        BuyerKey::from(&Email::parse(raw).unwrap()).0
    }

    /// Every spelling on a line is one buyer; lines are different buyers.
    #[test]
    fn spellings_of_one_mailbox_share_a_key() {
        let groups: &[&[&str]] = &[
            &[
                "ada@example.org",
                "ADA@example.org",
                "ada+tickets@example.org",
                "ada+a+b@example.org",
                // Fullwidth letters and a fullwidth plus (NFKC).
                "ａｄａ@example.org",
                "ａｄａ＋x@example.org",
                // Cyrillic а (U+0430), Greek α is not confusable with a.
                "\u{430}d\u{430}@example.org",
                // Cyrillic е in the domain.
                "ada@\u{435}xample.org",
            ],
            &[
                "janedoe@gmail.com",
                "jane.doe@gmail.com",
                "j.a.n.e.d.o.e@gmail.com",
                "Jane.Doe+resale@googlemail.com",
                "janedoe@googlemail.com",
            ],
            &[
                // Composed é, and e with a combining acute accent.
                "ren\u{e9}@example.org",
                "rene\u{301}@example.org",
            ],
            &[
                // An internationalised domain and its punycode form.
                "ada@b\u{fc}cher.de",
                "ada@B\u{dc}CHER.de",
                "ada@xn--bcher-kva.de",
            ],
            // Dots count outside Gmail.
            &["jane.doe@example.org"],
            &["janedoe@example.org"],
        ];
        let mut seen = std::collections::HashMap::new();
        for (i, group) in groups.iter().enumerate() {
            for raw in *group {
                let k = key(raw);
                if let Some(&other) = seen.get(&k) {
                    assert_eq!(other, i, "{raw} folds to {k}, the key of group {other}");
                }
                seen.insert(k, i);
            }
            let first = key(group[0]);
            for raw in *group {
                assert_eq!(key(raw), first, "{raw} vs {}", group[0]);
            }
        }
    }

    /// The table's fold of ASCII text is the full fold, for every ASCII
    /// character and for 20,000 drawn strings (which mix the characters
    /// whose skeletons differ: `m`/`rn`, `0`/`o`, `1`/`l`, `|`, capitals, and
    /// `%`, which the table leaves to the full fold).
    #[test]
    fn ascii_parts_fold_as_the_full_fold_does() {
        let table_folds = ascii_folds().iter().filter(|f| f.is_some()).count();
        assert!(
            table_folds >= 120,
            "{table_folds} ASCII characters in the table"
        );
        for b in 0..128u8 {
            let c = char::from(b).to_string();
            assert_eq!(fold(&c), fold_unicode(&c), "{b:#x}");
        }
        let alphabet = b"amrnRN01lLIiOo|.-_+!'`~{}%";
        let mut state: u64 = 0x2545_F491_4F6C_DD1D;
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = (state % 24) as usize;
            let part: String = (0..len)
                .map(|i| char::from(alphabet[((state >> (i % 40)) as usize + i) % alphabet.len()]))
                .collect();
            assert_eq!(fold(&part), fold_unicode(&part), "{part:?}");
        }
    }

    #[test]
    fn limits_check_the_ticket_type_then_the_event() {
        let limits = BuyerLimits {
            per_ticket_type: 4,
            per_event: Some(6),
        };
        assert_eq!(limits.check(0, 0, 4), Ok(()));
        assert_eq!(
            limits.check(1, 1, 4),
            Err(LimitBreach::TicketType { max: 4 })
        );
        assert_eq!(limits.check(0, 3, 4), Err(LimitBreach::Event { max: 6 }));
        assert_eq!(limits.check(2, 4, 2), Ok(()));
        let no_event_limit = BuyerLimits {
            per_event: None,
            ..limits
        };
        assert_eq!(no_event_limit.check(0, 1_000, 4), Ok(()));
    }

    #[test]
    fn a_key_reads_as_its_folded_address() {
        let key = BuyerKey::from(&Email::parse("Jane.Doe+x@GoogleMail.com").unwrap());
        assert_eq!(key.as_str(), "janedoe@gmail.com");
        assert_eq!(key.to_string(), "janedoe@gmail.com");
    }
}
