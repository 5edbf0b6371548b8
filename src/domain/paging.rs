//! Pages of the organizer's lists that are read in full today no more: an
//! event's presale codes and its waiting-list places. Keyset pages with
//! opaque cursors (`?after=`, the `next` of the page before) and `limit`
//! from 1 to [`super::MAX_ORDERS_LIMIT`], as the order list pages.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use time::OffsetDateTime;
use uuid::Uuid;

use super::{
    DEFAULT_ORDERS_LIMIT, InvalidField,
    organizer_api::{limit, pairs, unknown},
};

/// Rows per page of these lists unless `limit` says otherwise (the pages
/// show this many).
pub const DEFAULT_PAGE_LIMIT: i64 = DEFAULT_ORDERS_LIMIT;

/// Where a page of an event's presale codes starts: after this code in
/// `(created_at, code)` order (a code is unique in its event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeCursor {
    pub created_at: OffsetDateTime,
    pub code: String,
}

impl CodeCursor {
    pub fn encode(&self) -> String {
        let raw = format!("c.{}.{}", self.created_at.unix_timestamp_nanos(), self.code);
        URL_SAFE_NO_PAD.encode(raw)
    }

    pub fn parse(raw: &str) -> Result<Self, InvalidField> {
        let invalid = || InvalidField::new("after", "This is not a page of the presale codes.");
        let text = decode(raw).ok_or_else(invalid)?;
        let rest = text.strip_prefix("c.").ok_or_else(invalid)?;
        let (nanos, code) = rest.split_once('.').ok_or_else(invalid)?;
        let created_at = instant(nanos).ok_or_else(invalid)?;
        if code.is_empty() {
            return Err(invalid());
        }
        Ok(Self {
            created_at,
            code: code.to_owned(),
        })
    }
}

/// Where a page of an event's waiting-list places starts: after this place
/// in the list's order (ticket type, those in line first in their order,
/// then the others by when they joined).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryCursor {
    pub type_position: i32,
    /// Not waiting in line (offered, confirmed, left, ...).
    pub settled: bool,
    /// The place in line; [`i64::MAX`] for a place without one.
    pub line_position: i64,
    pub joined_at: OffsetDateTime,
    pub id: Uuid,
}

impl EntryCursor {
    pub fn encode(&self) -> String {
        let raw = format!(
            "w.{}.{}.{}.{}.{}",
            self.type_position,
            u8::from(self.settled),
            self.line_position,
            self.joined_at.unix_timestamp_nanos(),
            self.id.simple()
        );
        URL_SAFE_NO_PAD.encode(raw)
    }

    pub fn parse(raw: &str) -> Result<Self, InvalidField> {
        let invalid = || InvalidField::new("after", "This is not a page of the waiting list.");
        let text = decode(raw).ok_or_else(invalid)?;
        let rest = text.strip_prefix("w.").ok_or_else(invalid)?;
        let parts: Vec<&str> = rest.split('.').collect();
        let [type_position, settled, line_position, nanos, id] = parts[..] else {
            return Err(invalid());
        };
        Ok(Self {
            type_position: type_position.parse().map_err(|_| invalid())?,
            settled: match settled {
                "0" => false,
                "1" => true,
                _ => return Err(invalid()),
            },
            line_position: line_position.parse().map_err(|_| invalid())?,
            joined_at: instant(nanos).ok_or_else(invalid)?,
            id: Uuid::try_parse(id).map_err(|_| invalid())?,
        })
    }
}

/// `?limit=&after=`: a page of one of these lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageQuery<C> {
    pub limit: i64,
    pub after: Option<C>,
}

impl<C> Default for PageQuery<C> {
    fn default() -> Self {
        Self {
            limit: DEFAULT_PAGE_LIMIT,
            after: None,
        }
    }
}

/// A page of an event's presale codes.
pub type CodeQuery = PageQuery<CodeCursor>;
/// A page of an event's waiting-list places.
pub type EntryQuery = PageQuery<EntryCursor>;

impl<C> PageQuery<C> {
    /// The API's query: `limit` and `after` at most once each, nothing else.
    pub fn parse(
        raw: Option<&str>,
        cursor: impl Fn(&str) -> Result<C, InvalidField>,
    ) -> Result<Self, InvalidField> {
        let mut query = Self::default();
        for (key, value) in pairs(raw)? {
            match key.as_str() {
                "limit" => query.limit = limit(&value)?,
                "after" if value.trim().is_empty() => {}
                "after" => query.after = Some(cursor(&value)?),
                other => return Err(unknown(other)),
            }
        }
        Ok(query)
    }

    /// A page's query: `after` only (the page size is the default); other
    /// parameters are the page's own business.
    pub fn from_page(
        raw: Option<&str>,
        cursor: impl Fn(&str) -> Result<C, InvalidField>,
    ) -> Result<Self, InvalidField> {
        let mut query = Self::default();
        for (key, value) in form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
            if key == "after" && !value.trim().is_empty() {
                query.after = Some(cursor(&value)?);
            }
        }
        Ok(query)
    }
}

fn decode(raw: &str) -> Option<String> {
    let bytes = URL_SAFE_NO_PAD.decode(raw.trim()).ok()?;
    String::from_utf8(bytes).ok()
}

fn instant(nanos: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp_nanos(nanos.parse().ok()?).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn cursors_round_trip_and_junk_names_after() {
        let at = OffsetDateTime::from_unix_timestamp_nanos(1_800_000_000_123_456_000).unwrap();
        let code = CodeCursor {
            created_at: at,
            code: "FAN-CLUB".into(),
        };
        assert_eq!(CodeCursor::parse(&code.encode()).unwrap(), code);
        let entry = EntryCursor {
            type_position: -1,
            settled: true,
            line_position: i64::MAX,
            joined_at: at,
            id: Uuid::new_v4(),
        };
        assert_eq!(EntryCursor::parse(&entry.encode()).unwrap(), entry);
        for junk in ["x", "!!!", &URL_SAFE_NO_PAD.encode("c.1."), &entry.encode()] {
            assert_eq!(CodeCursor::parse(junk).unwrap_err().field, "after");
        }
        for junk in ["x", &URL_SAFE_NO_PAD.encode("w.1.2.3.4.5"), &code.encode()] {
            assert_eq!(EntryCursor::parse(junk).unwrap_err().field, "after");
        }
    }

    #[test]
    fn page_queries_name_the_wrong_parameter() {
        let q = CodeQuery::parse(Some("limit=7&after="), CodeCursor::parse).unwrap();
        assert_eq!((q.limit, q.after), (7, None));
        assert_eq!(
            CodeQuery::parse(None, CodeCursor::parse).unwrap().limit,
            DEFAULT_PAGE_LIMIT
        );
        for (raw, field) in [
            ("limit=0", "limit"),
            ("limit=501", "limit"),
            ("limit=x", "limit"),
            ("after=junk", "after"),
            ("page=2", "page"),
            ("limit=1&limit=2", "limit"),
        ] {
            let err = EntryQuery::parse(Some(raw), EntryCursor::parse).unwrap_err();
            assert_eq!(err.field, field, "{raw}");
        }
        let page = CodeQuery::from_page(Some("created=3"), CodeCursor::parse).unwrap();
        assert_eq!(page, CodeQuery::default());
        assert!(CodeQuery::from_page(Some("after=junk"), CodeCursor::parse).is_err());
    }
}
