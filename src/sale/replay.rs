//! Idempotency: a request whose buyer and key made an order before gets
//! that order back, if it asks for the same purchase.

use sqlx::PgPool;

use super::{
    order::{Order, OrderRef, find},
    outcome::Purchase,
    request::PurchaseRequest,
    round_trips::postgres_round,
};
use crate::error::AppError;

/// The buyer's earlier order for this key, replayed, or "not found".
pub(super) async fn replay_by_key(
    db: &PgPool,
    request: &PurchaseRequest,
) -> Result<Purchase, AppError> {
    postgres_round("replay");
    match find(db, OrderRef::Key(&request.email, &request.idempotency_key)).await? {
        Some(existing) => replay(existing, request),
        None => Err(AppError::NotFound),
    }
}

/// `existing`, the order of the request's key, replayed if the request
/// asks for the same purchase; a conflict if the key was used for another.
pub(super) fn replay(existing: Order, request: &PurchaseRequest) -> Result<Purchase, AppError> {
    if existing.ticket_type_id == request.ticket_type_id
        && existing.quantity == request.quantity.get()
    {
        Ok(Purchase::Replayed(existing))
    } else {
        Err(AppError::IdempotencyConflict)
    }
}

#[cfg(test)]
mod tests {
    use time::OffsetDateTime;

    use super::*;
    use crate::domain::{Email, IdempotencyKey, OrderId, OrderStatus, Quantity, TicketTypeId};

    fn order(ticket_type_id: TicketTypeId, quantity: i32) -> Order {
        Order {
            id: OrderId::from(uuid::Uuid::new_v4()),
            ticket_type_id,
            email: "ada@example.org".into(),
            quantity,
            status: OrderStatus::Confirmed,
            unit_price_minor: 2500,
            currency: "EUR".into(),
            created_at: OffsetDateTime::UNIX_EPOCH,
            hold_expires_at: None,
        }
    }

    fn request(ticket_type_id: TicketTypeId, quantity: i64) -> PurchaseRequest {
        PurchaseRequest {
            event_id: None,
            ticket_type_id,
            quantity: Quantity::new(quantity).unwrap(),
            email: Email::parse("ada@example.org").unwrap(),
            idempotency_key: IdempotencyKey::generate(),
            pass: None,
            queue_entry: None,
            presale_code: None,
            client: None,
        }
    }

    #[test]
    fn a_key_replays_only_the_same_purchase() {
        let (tt, other) = (
            TicketTypeId::from(uuid::Uuid::new_v4()),
            TicketTypeId::from(uuid::Uuid::new_v4()),
        );
        let existing = order(tt, 2);
        assert_eq!(
            replay(existing.clone(), &request(tt, 2)).unwrap(),
            Purchase::Replayed(existing.clone())
        );
        for mismatch in [request(tt, 3), request(other, 2), request(other, 3)] {
            assert!(matches!(
                replay(existing.clone(), &mismatch),
                Err(AppError::IdempotencyConflict)
            ));
        }
    }
}
