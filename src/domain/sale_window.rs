//! The one rule for "is the sale open": an event's status and its sale
//! window, against a clock. Pages, the purchase precheck and the refusal
//! after a lost race all ask [`SaleWindow::state`]. Its SQL twin is the
//! function `sale_open(status, opens_at, closes_at, at)` from
//! migrations/0003_sale_open.sql, which the sale transaction's conditional
//! `UPDATE` calls; `tests/sale_window.rs` checks that the two agree.

use time::OffsetDateTime;

use super::EventStatus;

/// Where an event's sale stands at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaleState {
    Draft,
    NotOpenYet,
    Open,
    Closed,
    Cancelled,
}

/// What decides whether an event sells: its status and its sale window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaleWindow {
    pub status: EventStatus,
    pub opens_at: OffsetDateTime,
    /// `None`: the sale stays open until the event is cancelled.
    pub closes_at: Option<OffsetDateTime>,
}

impl SaleWindow {
    /// Open from `opens_at` (inclusive) to `closes_at` (exclusive), while
    /// published.
    pub fn state(&self, now: OffsetDateTime) -> SaleState {
        match self.status {
            EventStatus::Draft => SaleState::Draft,
            EventStatus::Cancelled => SaleState::Cancelled,
            EventStatus::Published if now < self.opens_at => SaleState::NotOpenYet,
            EventStatus::Published if self.closes_at.is_some_and(|c| now >= c) => SaleState::Closed,
            EventStatus::Published => SaleState::Open,
        }
    }
}

#[cfg(test)]
mod tests {
    use time::{Duration, macros::datetime};

    use super::*;

    #[test]
    fn the_window_opens_inclusively_and_closes_exclusively() {
        let opens = datetime!(2027-01-01 10:00 UTC);
        let closes = opens + Duration::hours(1);
        let window = |status| SaleWindow {
            status,
            opens_at: opens,
            closes_at: Some(closes),
        };
        let published = window(EventStatus::Published);
        assert_eq!(
            published.state(opens - Duration::SECOND),
            SaleState::NotOpenYet
        );
        assert_eq!(published.state(opens), SaleState::Open);
        assert_eq!(published.state(closes - Duration::SECOND), SaleState::Open);
        assert_eq!(published.state(closes), SaleState::Closed);
        assert_eq!(window(EventStatus::Draft).state(opens), SaleState::Draft);
        assert_eq!(
            window(EventStatus::Cancelled).state(opens),
            SaleState::Cancelled
        );
    }
}
