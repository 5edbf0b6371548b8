//! The one rule for "is the sale open": an event's status and its sale
//! window, against a clock. Pages, the purchase precheck and the refusal
//! after a lost race all ask [`SaleWindow::state`]. Its SQL twin is the
//! function `sale_open(status, opens_at, closes_at, starts_at, at)` from
//! migrations/0004_sale_closes_at_start.sql, which the sale transaction's
//! conditional `UPDATE` calls; `tests/sale_window.rs` checks that the two
//! agree.

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
    /// `None`: the sale closes when the event starts.
    pub closes_at: Option<OffsetDateTime>,
    /// When the event starts: the close of a sale without `closes_at`.
    pub starts_at: OffsetDateTime,
}

impl SaleWindow {
    /// Open from `opens_at` (inclusive) to `closes_at` (exclusive), or to
    /// the event's start when there is no `closes_at`, while published.
    pub fn state(&self, now: OffsetDateTime) -> SaleState {
        match self.status {
            EventStatus::Draft => SaleState::Draft,
            EventStatus::Cancelled => SaleState::Cancelled,
            EventStatus::Published if now < self.opens_at => SaleState::NotOpenYet,
            EventStatus::Published if now >= self.closes() => SaleState::Closed,
            EventStatus::Published => SaleState::Open,
        }
    }

    /// When the sale closes: `closes_at`, or else the event's start; never
    /// after the start (a close moved past it does not reopen the sale of an
    /// event that has begun).
    pub fn closes(&self) -> OffsetDateTime {
        self.closes_at
            .map_or(self.starts_at, |closes| closes.min(self.starts_at))
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
            starts_at: closes + Duration::days(1),
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

    #[test]
    fn without_a_close_time_the_sale_closes_when_the_event_starts() {
        let opens = datetime!(2027-01-01 10:00 UTC);
        let starts = opens + Duration::days(7);
        let window = SaleWindow {
            status: EventStatus::Published,
            opens_at: opens,
            closes_at: None,
            starts_at: starts,
        };
        assert_eq!(window.state(starts - Duration::SECOND), SaleState::Open);
        assert_eq!(window.state(starts), SaleState::Closed);
        assert_eq!(window.state(starts + Duration::days(1)), SaleState::Closed);
    }
}
