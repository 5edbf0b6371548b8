//! The public event list, a page at a time (keyset pagination on
//! `(starts_at, id)`), and what one organizer may create.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use time::OffsetDateTime;
use uuid::Uuid;

use super::{EventId, InvalidField};

/// Events on one page of the public list (`/`, `/api/v1/events`).
pub const EVENTS_PER_PAGE: i64 = 50;

/// Where a page of the public list starts: after this event in
/// `(starts_at, id)` order. Opaque to clients (`?after=`), so its encoding
/// may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventCursor {
    pub starts_at: OffsetDateTime,
    pub id: EventId,
}

impl EventCursor {
    pub fn encode(&self) -> String {
        let raw = format!(
            "{}.{}",
            self.starts_at.unix_timestamp_nanos(),
            self.id.get().simple()
        );
        URL_SAFE_NO_PAD.encode(raw)
    }

    /// `?after=`: absent or empty is the first page; anything that is not a
    /// cursor this app made is an invalid field.
    pub fn parse(raw: Option<&str>) -> Result<Option<Self>, InvalidField> {
        let raw = raw.unwrap_or_default().trim();
        if raw.is_empty() {
            return Ok(None);
        }
        let invalid = || InvalidField::new("after", "This is not a page of the event list.");
        let bytes = URL_SAFE_NO_PAD.decode(raw).map_err(|_| invalid())?;
        let text = String::from_utf8(bytes).map_err(|_| invalid())?;
        let (nanos, id) = text.split_once('.').ok_or_else(invalid)?;
        let nanos: i128 = nanos.parse().map_err(|_| invalid())?;
        let starts_at = OffsetDateTime::from_unix_timestamp_nanos(nanos).map_err(|_| invalid())?;
        let id = Uuid::try_parse(id).map_err(|_| invalid())?;
        Ok(Some(Self {
            starts_at,
            id: id.into(),
        }))
    }
}

/// What one organizer may create (configurable, see `config.rs`): checked
/// inside the transaction that writes, with the organizer's row locked, so
/// concurrent requests cannot together pass a quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quotas {
    /// Events published at once (not drafts, not cancelled).
    pub published_events: i64,
    /// Ticket types of one event (never above [`super::MAX_TICKET_TYPES`],
    /// which the forms can carry).
    pub ticket_types_per_event: i64,
    /// Tickets over all the organizer's events that are not cancelled.
    pub total_capacity: i64,
    /// Presale codes of one event (checked with the event's row locked).
    pub presale_codes_per_event: i64,
    /// Whether Stripe is connected: without, an event whose tickets have a
    /// price paid through Stripe cannot be published.
    pub stripe_connected: bool,
}

impl Default for Quotas {
    fn default() -> Self {
        Self {
            published_events: 100,
            ticket_types_per_event: super::MAX_TICKET_TYPES as i64,
            total_capacity: 1_000_000,
            presale_codes_per_event: 10_000,
            stripe_connected: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_junk_is_invalid() {
        let cursor = EventCursor {
            starts_at: OffsetDateTime::from_unix_timestamp_nanos(1_800_000_000_123_456_789)
                .unwrap(),
            id: Uuid::new_v4().into(),
        };
        assert_eq!(
            EventCursor::parse(Some(&cursor.encode())).unwrap(),
            Some(cursor)
        );
        assert_eq!(EventCursor::parse(None).unwrap(), None);
        assert_eq!(EventCursor::parse(Some("")).unwrap(), None);
        for junk in ["x", "!!!", "MTIz", &URL_SAFE_NO_PAD.encode("1.not-a-uuid")] {
            assert_eq!(
                EventCursor::parse(Some(junk)).unwrap_err().field,
                "after",
                "{junk}"
            );
        }
    }

    #[test]
    fn default_quotas() {
        assert_eq!(
            Quotas::default(),
            Quotas {
                published_events: 100,
                ticket_types_per_event: 20,
                total_capacity: 1_000_000,
                presale_codes_per_event: 10_000,
                stripe_connected: false,
            }
        );
    }
}
