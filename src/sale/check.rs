//! The read before the sale transaction: what decides whether a purchase
//! may go ahead, and whether its key was already used, in one query.

use sqlx::PgPool;
use time::OffsetDateTime;

use super::{request::PurchaseRequest, round_trips::postgres_round};
use crate::{
    domain::{BuyerLimits, EventStatus, OrderId, Quantity, SaleState, SaleWindow},
    error::AppError,
};

#[derive(Debug)]
pub(super) struct SaleCheck {
    /// The buyer's order for this idempotency key, if there is one.
    pub existing_order: Option<OrderId>,
    pub remaining: i32,
    pub max_per_order: i32,
    pub max_per_buyer: i32,
    /// The event's limit per buyer across its ticket types, if it has one.
    pub event_max_per_buyer: Option<i32>,
    /// Set (on the hot row) when the event is being cancelled.
    pub sales_halted: bool,
    /// Sold only with a presale code that unlocks it.
    pub hidden: bool,
    pub window: SaleWindow,
}

impl SaleCheck {
    /// `None` when the ticket type does not exist (or, when the request
    /// names an event, is not one of its ticket types).
    pub async fn load(db: &PgPool, request: &PurchaseRequest) -> Result<Option<Self>, AppError> {
        postgres_round("check");
        let row = sqlx::query_file!(
            "sql/sale/check.sql",
            request.ticket_type_id.get(),
            request.email.as_str(),
            request.idempotency_key.as_str(),
            request.event_id.map(|id| id.get()),
        )
        .fetch_optional(db)
        .await?;
        Ok(row.map(|row| Self {
            existing_order: row.existing_order.map(OrderId::from),
            remaining: row.remaining,
            max_per_order: row.max_per_order,
            max_per_buyer: row.max_per_buyer,
            event_max_per_buyer: row.event_max_per_buyer,
            sales_halted: row.sales_halted,
            hidden: row.hidden,
            window: SaleWindow {
                status: row.status,
                opens_at: row.sale_opens_at,
                closes_at: row.sale_closes_at,
                starts_at: row.starts_at,
            },
        }))
    }

    pub fn limits(&self) -> BuyerLimits {
        BuyerLimits {
            per_ticket_type: self.max_per_buyer,
            per_event: self.event_max_per_buyer,
        }
    }

    /// Why this purchase cannot succeed now, if it cannot.
    pub fn refusal(&self, now: OffsetDateTime, quantity: Quantity) -> Result<(), AppError> {
        match self.window.state(now) {
            SaleState::Draft => return Err(AppError::NotFound),
            SaleState::Cancelled => return Err(AppError::SaleClosed("This event was cancelled.")),
            SaleState::NotOpenYet => {
                return Err(AppError::SaleNotOpen {
                    opens_at: self.window.opens_at,
                });
            }
            SaleState::Closed => {
                return Err(AppError::SaleClosed("The sale for this event has closed."));
            }
            SaleState::Open => {}
        }
        if self.sales_halted {
            return Err(AppError::SaleClosed("The sale for this event has stopped."));
        }
        if quantity.get() > self.max_per_order {
            return Err(AppError::OrderLimit {
                max: self.max_per_order,
            });
        }
        // Nothing held yet can only make it worse: what already cannot fit.
        self.limits().check(0, 0, quantity.get())?;
        if self.remaining == 0 {
            return Err(AppError::SoldOut);
        }
        if self.remaining < quantity.get() {
            return Err(AppError::NotEnoughLeft {
                remaining: self.remaining,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use time::{Duration, macros::datetime};

    use super::*;

    const OPENS: OffsetDateTime = datetime!(2027-01-01 10:00 UTC);

    fn open_sale() -> SaleCheck {
        SaleCheck {
            existing_order: None,
            remaining: 10,
            max_per_order: 4,
            max_per_buyer: 6,
            event_max_per_buyer: None,
            sales_halted: false,
            hidden: false,
            window: SaleWindow {
                status: EventStatus::Published,
                opens_at: OPENS,
                closes_at: None,
                starts_at: OPENS + Duration::days(30),
            },
        }
    }

    fn refusal(check: &SaleCheck, quantity: i64) -> Result<(), AppError> {
        check.refusal(OPENS + Duration::hours(1), Quantity::new(quantity).unwrap())
    }

    #[test]
    fn the_window_and_a_halt_refuse_first() {
        let check = open_sale();
        assert!(matches!(refusal(&check, 1), Ok(())));
        let before = check.refusal(OPENS - Duration::SECOND, Quantity::new(1).unwrap());
        assert!(matches!(before, Err(AppError::SaleNotOpen { opens_at }) if opens_at == OPENS));
        let after = check.refusal(OPENS + Duration::days(30), Quantity::new(1).unwrap());
        assert!(matches!(after, Err(AppError::SaleClosed(m)) if m.contains("has closed")));
        let mut draft = open_sale();
        draft.window.status = EventStatus::Draft;
        assert!(matches!(refusal(&draft, 1), Err(AppError::NotFound)));
        let mut cancelled = open_sale();
        cancelled.window.status = EventStatus::Cancelled;
        assert!(matches!(
            refusal(&cancelled, 1),
            Err(AppError::SaleClosed(m)) if m.contains("cancelled")
        ));
        let mut halted = open_sale();
        halted.sales_halted = true;
        assert!(matches!(
            refusal(&halted, 1),
            Err(AppError::SaleClosed(m)) if m.contains("stopped")
        ));
    }

    #[test]
    fn limits_then_stock() {
        let check = open_sale();
        assert!(matches!(refusal(&check, 4), Ok(())));
        assert!(matches!(
            refusal(&check, 5),
            Err(AppError::OrderLimit { max: 4 })
        ));
        let mut generous = open_sale();
        generous.max_per_order = 20;
        assert!(matches!(refusal(&generous, 6), Ok(())));
        assert!(matches!(
            refusal(&generous, 7),
            Err(AppError::BuyerLimit { max: 6 })
        ));
        generous.event_max_per_buyer = Some(5);
        assert!(matches!(refusal(&generous, 5), Ok(())));
        assert!(matches!(
            refusal(&generous, 6),
            Err(AppError::EventBuyerLimit { max: 5 })
        ));
        assert_eq!(
            generous.limits(),
            BuyerLimits {
                per_ticket_type: 6,
                per_event: Some(5),
            }
        );

        let mut few = open_sale();
        few.remaining = 3;
        assert!(matches!(refusal(&few, 3), Ok(())));
        assert!(matches!(refusal(&few, 2), Ok(())));
        assert!(matches!(
            refusal(&few, 4),
            Err(AppError::NotEnoughLeft { remaining: 3 })
        ));
        few.remaining = 0;
        assert!(matches!(refusal(&few, 1), Err(AppError::SoldOut)));
    }
}
