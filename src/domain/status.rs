//! Row statuses as enums; the database stores their `as_str` text (see the
//! `*_status_known` CHECK constraints in migrations/).

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventStatus {
    Draft,
    Published,
    Cancelled,
}

impl EventStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Draft => "draft",
            Self::Published => "published",
            Self::Cancelled => "cancelled",
        }
    }

    /// The status a stored text names, if it names one.
    pub fn from_db(s: &str) -> Option<Self> {
        match s {
            "draft" => Some(Self::Draft),
            "published" => Some(Self::Published),
            "cancelled" => Some(Self::Cancelled),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum OrderStatus {
    /// Taken from stock, waiting for the buyer to confirm from their
    /// mailbox before its expiry; no tickets yet.
    Held,
    Confirmed,
    Cancelled,
    /// A hold not confirmed in time: its stock went back on sale.
    Expired,
}

impl OrderStatus {
    /// Whether the order holds its stock and counts toward the buyer's
    /// limits: held or confirmed.
    pub fn is_live(self) -> bool {
        matches!(self, Self::Held | Self::Confirmed)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Held => "held",
            Self::Confirmed => "confirmed",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
        }
    }

    /// The status a stored text names, if it names one.
    pub fn from_db(s: &str) -> Option<Self> {
        match s {
            "held" => Some(Self::Held),
            "confirmed" => Some(Self::Confirmed),
            "cancelled" => Some(Self::Cancelled),
            "expired" => Some(Self::Expired),
            _ => None,
        }
    }
}

/// Where a waiting list entry stands (`waitlist_entries.status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum WaitlistStatus {
    /// The mail with the link is out; no place in line yet.
    Unconfirmed,
    /// In line.
    Waiting,
    /// Tickets came back and were offered as a held order.
    Offered,
    /// Skipped when tickets came back: the buyer already held their limit.
    Passed,
    /// The buyer left the list.
    Left,
    /// The event was cancelled while this place was open.
    Closed,
}

impl WaitlistStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unconfirmed => "unconfirmed",
            Self::Waiting => "waiting",
            Self::Offered => "offered",
            Self::Passed => "passed",
            Self::Left => "left",
            Self::Closed => "closed",
        }
    }

    pub fn from_db(s: &str) -> Option<Self> {
        match s {
            "unconfirmed" => Some(Self::Unconfirmed),
            "waiting" => Some(Self::Waiting),
            "offered" => Some(Self::Offered),
            "passed" => Some(Self::Passed),
            "left" => Some(Self::Left),
            "closed" => Some(Self::Closed),
            _ => None,
        }
    }
}

impl fmt::Display for EventStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for OrderStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip_through_their_stored_text() {
        for status in [
            EventStatus::Draft,
            EventStatus::Published,
            EventStatus::Cancelled,
        ] {
            assert_eq!(EventStatus::from_db(status.as_str()), Some(status));
            assert_eq!(status.to_string(), status.as_str());
        }
        assert_eq!(EventStatus::Published.as_str(), "published");
        assert_eq!(EventStatus::from_db("live"), None);
        for status in [
            OrderStatus::Held,
            OrderStatus::Confirmed,
            OrderStatus::Cancelled,
            OrderStatus::Expired,
        ] {
            assert_eq!(OrderStatus::from_db(status.as_str()), Some(status));
            assert_eq!(status.to_string(), status.as_str());
        }
        assert_eq!(OrderStatus::Confirmed.as_str(), "confirmed");
        assert_eq!(OrderStatus::Cancelled.as_str(), "cancelled");
        assert_eq!(OrderStatus::Held.as_str(), "held");
        for status in [
            WaitlistStatus::Unconfirmed,
            WaitlistStatus::Waiting,
            WaitlistStatus::Offered,
            WaitlistStatus::Passed,
            WaitlistStatus::Left,
            WaitlistStatus::Closed,
        ] {
            assert_eq!(WaitlistStatus::from_db(status.as_str()), Some(status));
        }
        assert_eq!(OrderStatus::Expired.as_str(), "expired");
        assert_eq!(OrderStatus::from_db("refunded"), None);
    }
}
