//! What a purchase that holds tickets answers: the order it created, or
//! the one an earlier request with the same key created.

use super::order::Order;
use crate::domain::CancelSecret;

/// The outcome of a purchase that holds tickets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Purchase {
    /// This request wrote the order. Its cancel secret exists only here: the
    /// table keeps its hash, so a replay cannot give it again.
    Created {
        order: Order,
        cancel_secret: CancelSecret,
    },
    /// An earlier request with the same buyer and key did; this is its order.
    Replayed(Order),
}

impl Purchase {
    pub fn order(&self) -> &Order {
        match self {
            Self::Created { order, .. } | Self::Replayed(order) => order,
        }
    }

    /// The cancel secret, on the answer that created the order only.
    pub fn cancel_secret(&self) -> Option<&CancelSecret> {
        match self {
            Self::Created { cancel_secret, .. } => Some(cancel_secret),
            Self::Replayed(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use time::OffsetDateTime;

    use super::*;
    use crate::domain::{OrderId, OrderStatus, TicketTypeId};

    #[test]
    fn a_purchase_shows_its_order_and_a_created_one_its_secret() {
        let existing = Order {
            id: OrderId::from(uuid::Uuid::new_v4()),
            ticket_type_id: TicketTypeId::from(uuid::Uuid::new_v4()),
            email: "ada@example.org".into(),
            quantity: 1,
            status: OrderStatus::Confirmed,
            unit_price_minor: 2500,
            currency: "EUR".into(),
            created_at: OffsetDateTime::UNIX_EPOCH,
            hold_expires_at: None,
        };
        let secret = CancelSecret::generate();
        let created = Purchase::Created {
            order: existing.clone(),
            cancel_secret: secret.clone(),
        };
        assert_eq!(created.order(), &existing);
        assert_eq!(created.cancel_secret(), Some(&secret));
        let replayed = Purchase::Replayed(existing.clone());
        assert_eq!(replayed.order(), &existing);
        assert_eq!(replayed.cancel_secret(), None);
    }
}
