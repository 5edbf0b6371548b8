//! The organizer API's query strings, parsed into types: the order list's
//! filters and keyset cursor (`(updated_at, id)`, opaque to clients) and the
//! sales series' range. Unknown parameters are refused, naming them.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use time::{Duration, OffsetDateTime, format_description::well_known::Rfc3339};
use uuid::Uuid;

use super::{
    EventCursor, InvalidField, Lines, OrderId, OrderStatus, normalise_query, refuse_control,
};

/// Orders per page of the API's order list unless `limit` says otherwise.
pub const DEFAULT_ORDERS_LIMIT: i64 = 100;
/// The organizer's own events per page unless `limit` says otherwise.
pub const DEFAULT_EVENTS_LIMIT: i64 = 100;
/// The most orders (or events) one page may hold.
pub const MAX_ORDERS_LIMIT: i64 = 500;
/// The longest range of the per-minute sales series: one day of minutes.
pub const MAX_SALES_MINUTES: i64 = 24 * 60;

/// Where a page of the order list starts: after this order in
/// `(updated_at, id)` order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OrderCursor {
    pub updated_at: OffsetDateTime,
    pub id: OrderId,
}

impl OrderCursor {
    pub fn encode(&self) -> String {
        let raw = format!(
            "o.{}.{}",
            self.updated_at.unix_timestamp_nanos(),
            self.id.get().simple()
        );
        URL_SAFE_NO_PAD.encode(raw)
    }

    pub fn parse(raw: &str) -> Result<Self, InvalidField> {
        let invalid = || InvalidField::new("after", "This is not a cursor of the order list.");
        let bytes = URL_SAFE_NO_PAD.decode(raw.trim()).map_err(|_| invalid())?;
        let text = String::from_utf8(bytes).map_err(|_| invalid())?;
        let rest = text.strip_prefix("o.").ok_or_else(invalid)?;
        let (nanos, id) = rest.split_once('.').ok_or_else(invalid)?;
        let nanos: i128 = nanos.parse().map_err(|_| invalid())?;
        let updated_at = OffsetDateTime::from_unix_timestamp_nanos(nanos).map_err(|_| invalid())?;
        let id = Uuid::try_parse(id).map_err(|_| invalid())?;
        Ok(Self {
            updated_at,
            id: id.into(),
        })
    }
}

/// `GET .../orders?limit=&after=&modified_since=&status=&email=`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderQuery {
    pub limit: i64,
    pub after: Option<OrderCursor>,
    /// Only orders changed (created, cancelled) at or after this instant.
    pub modified_since: Option<OffsetDateTime>,
    pub status: Option<OrderStatus>,
    /// The dashboard's search: the email contains this, any case; empty for all.
    pub email: String,
}

impl OrderQuery {
    pub fn parse(raw: Option<&str>) -> Result<Self, InvalidField> {
        let mut query = Self {
            limit: DEFAULT_ORDERS_LIMIT,
            after: None,
            modified_since: None,
            status: None,
            email: String::new(),
        };
        for (key, value) in pairs(raw)? {
            match key.as_str() {
                "limit" => query.limit = limit(&value)?,
                "after" if value.is_empty() => {}
                "after" => query.after = Some(OrderCursor::parse(&value)?),
                "modified_since" => query.modified_since = Some(rfc3339("modified_since", &value)?),
                "status" => {
                    query.status = Some(OrderStatus::from_db(value.trim()).ok_or_else(|| {
                        InvalidField::new("status", "Use confirmed or cancelled.")
                    })?)
                }
                "email" => {
                    refuse_control(&value, Lines::One)
                        .map_err(|message| InvalidField::new("email", message))?;
                    query.email = normalise_query(&value);
                }
                other => return Err(unknown(other)),
            }
        }
        Ok(query)
    }
}

/// `GET /api/v1/organizer/events?limit=&after=`: the organizer's events in
/// `(starts_at, id)` order, a page at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventListQuery {
    pub limit: i64,
    pub after: Option<EventCursor>,
}

impl EventListQuery {
    pub fn parse(raw: Option<&str>) -> Result<Self, InvalidField> {
        let mut query = Self {
            limit: DEFAULT_EVENTS_LIMIT,
            after: None,
        };
        for (key, value) in pairs(raw)? {
            match key.as_str() {
                "limit" => query.limit = limit(&value)?,
                "after" => query.after = EventCursor::parse(Some(&value))?,
                other => return Err(unknown(other)),
            }
        }
        Ok(query)
    }
}

/// `GET .../stats/sales?from=&to=`: whole minutes from `from` (rounded down
/// to its minute) up to `to` (exclusive); by default the last hour before `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SalesRange {
    pub from: OffsetDateTime,
    pub to: OffsetDateTime,
}

impl SalesRange {
    pub fn parse(raw: Option<&str>, now: OffsetDateTime) -> Result<Self, InvalidField> {
        let (mut from, mut to) = (None, None);
        for (key, value) in pairs(raw)? {
            match key.as_str() {
                "from" => from = Some(rfc3339("from", &value)?),
                "to" => to = Some(rfc3339("to", &value)?),
                other => return Err(unknown(other)),
            }
        }
        let to = to.unwrap_or(now);
        let from = from.unwrap_or(to - Duration::hours(1));
        let from = from
            .replace_second(0)
            .and_then(|t| t.replace_nanosecond(0))
            .unwrap_or(from);
        if to <= from {
            return Err(InvalidField::new("to", "`to` must come after `from`."));
        }
        if to - from > Duration::minutes(MAX_SALES_MINUTES) {
            return Err(InvalidField::new(
                "to",
                format!("Ask for at most {MAX_SALES_MINUTES} minutes at once."),
            ));
        }
        Ok(Self { from, to })
    }
}

/// The query's pairs; a parameter given twice is refused, naming it.
pub(super) fn pairs(raw: Option<&str>) -> Result<Vec<(String, String)>, InvalidField> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for (key, value) in form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
        if pairs.iter().any(|(k, _)| *k == key) {
            return Err(InvalidField::new(
                key.as_ref(),
                "Give this parameter at most once.",
            ));
        }
        pairs.push((key.into_owned(), value.into_owned()));
    }
    Ok(pairs)
}

pub(super) fn unknown(name: &str) -> InvalidField {
    let shown: String = name.chars().take(64).collect();
    InvalidField::new(shown, "This parameter is not known here.")
}

pub(super) fn limit(raw: &str) -> Result<i64, InvalidField> {
    raw.trim()
        .parse::<i64>()
        .ok()
        .filter(|n| (1..=MAX_ORDERS_LIMIT).contains(n))
        .ok_or_else(|| {
            InvalidField::new(
                "limit",
                format!("Use a whole number from 1 to {MAX_ORDERS_LIMIT}."),
            )
        })
}

fn rfc3339(field: &str, raw: &str) -> Result<OffsetDateTime, InvalidField> {
    OffsetDateTime::parse(raw.trim(), &Rfc3339).map_err(|_| {
        InvalidField::new(
            field,
            "Use an RFC 3339 date and time such as 2027-03-01T19:30:00Z.",
        )
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn order_cursors_round_trip_and_junk_names_after() {
        let cursor = OrderCursor {
            updated_at: OffsetDateTime::from_unix_timestamp_nanos(1_800_000_000_123_456_000)
                .unwrap(),
            id: Uuid::new_v4().into(),
        };
        assert_eq!(OrderCursor::parse(&cursor.encode()).unwrap(), cursor);
        for junk in ["x", "!!!", &URL_SAFE_NO_PAD.encode("1.2")] {
            assert_eq!(OrderCursor::parse(junk).unwrap_err().field, "after");
        }
    }

    #[test]
    fn order_queries_name_the_wrong_parameter() {
        let q = OrderQuery::parse(Some("limit=2&status=cancelled&email=%20Ada%20")).unwrap();
        assert_eq!(q.limit, 2);
        assert_eq!(q.status, Some(OrderStatus::Cancelled));
        assert_eq!(q.email, "Ada");
        assert_eq!(OrderQuery::parse(None).unwrap().limit, DEFAULT_ORDERS_LIMIT);
        for (raw, field) in [
            ("limit=0", "limit"),
            ("limit=501", "limit"),
            ("limit=x", "limit"),
            ("status=refunded", "status"),
            ("modified_since=yesterday", "modified_since"),
            ("after=junk", "after"),
            ("colour=red", "colour"),
            ("limit=1&limit=2", "limit"),
            ("email=a%00b", "email"),
        ] {
            assert_eq!(
                OrderQuery::parse(Some(raw)).unwrap_err().field,
                field,
                "{raw}"
            );
        }
    }

    #[test]
    fn sales_ranges_start_on_a_minute_and_are_bounded() {
        let now = OffsetDateTime::parse("2027-01-01T12:00:30Z", &Rfc3339).unwrap();
        let range = SalesRange::parse(None, now).unwrap();
        assert_eq!(range.to, now);
        assert_eq!(range.from.to_string(), "2027-01-01 11:00:00.0 +00:00:00");
        let range = SalesRange::parse(
            Some("from=2027-01-01T10:00:59Z&to=2027-01-01T11:00:00Z"),
            now,
        )
        .unwrap();
        assert_eq!(range.from.minute(), 0);
        for (raw, field) in [
            ("from=2027-01-01T11:00:00Z&to=2027-01-01T10:00:00Z", "to"),
            ("from=2027-01-01T00:00:00Z&to=2027-01-03T00:00:00Z", "to"),
            ("from=soon", "from"),
            ("step=60", "step"),
        ] {
            assert_eq!(
                SalesRange::parse(Some(raw), now).unwrap_err().field,
                field,
                "{raw}"
            );
        }
    }
}
