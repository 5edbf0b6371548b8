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
    Confirmed,
    Cancelled,
}

impl OrderStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Confirmed => "confirmed",
            Self::Cancelled => "cancelled",
        }
    }

    /// The status a stored text names, if it names one.
    pub fn from_db(s: &str) -> Option<Self> {
        match s {
            "confirmed" => Some(Self::Confirmed),
            "cancelled" => Some(Self::Cancelled),
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
        for status in [OrderStatus::Confirmed, OrderStatus::Cancelled] {
            assert_eq!(OrderStatus::from_db(status.as_str()), Some(status));
            assert_eq!(status.to_string(), status.as_str());
        }
        assert_eq!(OrderStatus::Confirmed.as_str(), "confirmed");
        assert_eq!(OrderStatus::Cancelled.as_str(), "cancelled");
        assert_eq!(OrderStatus::from_db("refunded"), None);
    }
}
