//! The dashboard's order list: the search (`?q=&page=`, parsed leniently:
//! only a control character in the search is refused), its `ILIKE` pattern
//! and the page count.

use super::{InvalidField, Lines, refuse_control};

/// Orders shown per page of the dashboard's order list.
pub const ORDERS_PER_PAGE: i64 = 50;

/// Longest search text used; anything longer is cut.
pub const MAX_QUERY_CHARS: usize = 200;

/// The search as it is used: trimmed and at most [`MAX_QUERY_CHARS`].
pub fn normalise_query(raw: &str) -> String {
    raw.trim().chars().take(MAX_QUERY_CHARS).collect()
}

/// An `ILIKE` pattern matching `query` anywhere, with `\`, `%` and `_`
/// escaped so that they match themselves; `None` for an empty search.
pub fn contains_pattern(query: &str) -> Option<String> {
    if query.is_empty() {
        return None;
    }
    let mut pattern = String::with_capacity(query.len() + 2);
    pattern.push('%');
    for c in query.chars() {
        if matches!(c, '\\' | '%' | '_') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    Some(pattern)
}

/// Pages needed for `matching` orders; an empty list is still one page.
pub fn page_count(matching: i64) -> i64 {
    ((matching + ORDERS_PER_PAGE - 1) / ORDERS_PER_PAGE).max(1)
}

/// `?q=` (email contains, any case) and `?page=` (1-based) of the order
/// list. Parsed by hand and leniently: a missing or malformed page is page
/// 1, and one past the end is the last page. Only a search holding a control
/// character (a NUL would reach Postgres) is refused, naming `q`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderSearch {
    pub q: String,
    pub page: i64,
}

impl OrderSearch {
    pub fn parse(raw: Option<&str>) -> Result<Self, InvalidField> {
        let mut search = Self {
            q: String::new(),
            page: 1,
        };
        let pairs = form_urlencoded::parse(raw.unwrap_or_default().as_bytes());
        let (mut seen_q, mut seen_page) = (false, false);
        for (key, value) in pairs {
            match key.as_ref() {
                "q" if !seen_q => {
                    seen_q = true;
                    search.q = normalise_query(&value);
                    refuse_control(&search.q, Lines::One).map_err(|message| {
                        InvalidField::new("q", format!("The search is not plain text. {message}"))
                    })?;
                }
                "page" if !seen_page => {
                    seen_page = true;
                    search.page = value.trim().parse::<i64>().unwrap_or(1).max(1);
                }
                _ => {}
            }
        }
        Ok(search)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_patterns_escape_wildcards() {
        assert_eq!(contains_pattern(""), None);
        assert_eq!(contains_pattern("ada").as_deref(), Some("%ada%"));
        assert_eq!(
            contains_pattern(r"50%_a\b").as_deref(),
            Some(r"%50\%\_a\\b%")
        );
    }

    #[test]
    fn queries_are_trimmed_and_cut() {
        assert_eq!(normalise_query("  Ada "), "Ada");
        assert_eq!(
            normalise_query(&"é".repeat(500)).chars().count(),
            MAX_QUERY_CHARS
        );
    }

    #[test]
    fn a_search_with_a_control_character_is_refused_naming_q() {
        for raw in ["q=a%00b", "q=%01", "q=x%7F", "page=2&q=a%C2%85b"] {
            assert_eq!(
                OrderSearch::parse(Some(raw)).unwrap_err().field,
                "q",
                "{raw}"
            );
        }
    }

    #[test]
    fn page_counts() {
        assert_eq!(page_count(0), 1);
        assert_eq!(page_count(1), 1);
        assert_eq!(page_count(50), 1);
        assert_eq!(page_count(51), 2);
        assert_eq!(page_count(120), 3);
    }

    #[test]
    fn searches_parse_leniently() {
        let parse = |raw: &str| OrderSearch::parse(Some(raw)).unwrap();
        assert_eq!(OrderSearch::parse(None).unwrap(), parse(""));
        assert_eq!(parse("").page, 1);
        assert_eq!(
            parse("q=+Ada%40X+&page=3"),
            OrderSearch {
                q: "Ada@X".into(),
                page: 3
            }
        );
        for page in [
            "page=0",
            "page=-4",
            "page=abc",
            "page=",
            "page=99999999999999999999999",
        ] {
            assert_eq!(parse(page).page, 1, "{page}");
        }
        assert_eq!(parse("page=9223372036854775807").page, i64::MAX);
        assert_eq!(
            parse("q=a&q=b&page=2&page=5"),
            OrderSearch {
                q: "a".into(),
                page: 2
            }
        );
    }
}
