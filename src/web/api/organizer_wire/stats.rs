//! An event's sales figures, and tickets sold per minute.

use serde::Serialize;
use time::OffsetDateTime;
use utoipa::ToSchema;

use crate::{
    db::dashboard::{MinuteSales, Revenue, SalesTotals, TicketTypeSales},
    domain::{EventId, SalesRange, TicketTypeId},
};

#[derive(Debug, Serialize, ToSchema)]
pub struct MoneyBody {
    currency: String,
    amount_minor: i64,
}

impl From<Revenue> for MoneyBody {
    fn from(revenue: Revenue) -> Self {
        Self {
            currency: revenue.currency,
            amount_minor: revenue.minor,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TicketTypeStats {
    id: TicketTypeId,
    name: String,
    capacity: i32,
    sold: i64,
    /// Tickets in orders still held: taken from the stock, waiting for their
    /// buyers' confirmation, back on sale if it never comes.
    held: i64,
    remaining: i32,
    /// One entry per currency sold in, at each order's own price.
    revenue: Vec<MoneyBody>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TotalStats {
    capacity: i64,
    sold: i64,
    held: i64,
    remaining: i64,
    revenue: Vec<MoneyBody>,
    /// Stripe's payments, per currency, in minor units.
    payments: Vec<crate::db::dashboard::PaymentTotals>,
}

/// `GET .../stats`: the dashboard's sales table.
#[derive(Debug, Serialize, ToSchema)]
pub struct StatsBody {
    event_id: EventId,
    ticket_types: Vec<TicketTypeStats>,
    totals: TotalStats,
}

impl StatsBody {
    pub fn new(event_id: EventId, sales: Vec<TicketTypeSales>, totals: SalesTotals) -> Self {
        Self {
            event_id,
            ticket_types: sales
                .into_iter()
                .map(|tt| TicketTypeStats {
                    id: tt.id,
                    name: tt.name,
                    capacity: tt.capacity,
                    sold: tt.sold,
                    held: tt.held,
                    remaining: tt.remaining,
                    revenue: tt.revenue.into_iter().map(Into::into).collect(),
                })
                .collect(),
            totals: TotalStats {
                capacity: totals.capacity,
                sold: totals.sold,
                held: totals.held,
                remaining: totals.remaining,
                revenue: totals.revenue.into_iter().map(Into::into).collect(),
                payments: totals.payments,
            },
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MinuteBody {
    #[serde(with = "time::serde::rfc3339")]
    at: OffsetDateTime,
    tickets: i64,
}

/// `GET .../stats/sales`: tickets sold per minute, every minute of the range.
#[derive(Debug, Serialize, ToSchema)]
pub struct SalesSeriesBody {
    event_id: EventId,
    #[serde(with = "time::serde::rfc3339")]
    from: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    to: OffsetDateTime,
    minutes: Vec<MinuteBody>,
}

impl SalesSeriesBody {
    pub fn new(event_id: EventId, range: SalesRange, minutes: Vec<MinuteSales>) -> Self {
        Self {
            event_id,
            from: range.from,
            to: range.to,
            minutes: minutes
                .into_iter()
                .map(|m| MinuteBody {
                    at: m.at,
                    tickets: m.tickets,
                })
                .collect(),
        }
    }
}
