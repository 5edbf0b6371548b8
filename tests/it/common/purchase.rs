//! One way for tests to buy: [`buy`] is the purchase path under test, so a
//! strategy parameter (when the engine has several) is added here once.

use sqlx::PgPool;
use stampede::{
    domain::{Email, IdempotencyKey, Quantity},
    error::AppError,
    sale::{self, Purchase, PurchaseRequest},
};
use time::OffsetDateTime;
use uuid::Uuid;

/// A purchase of `quantity` tickets by `email` under idempotency key `key`.
pub fn request(ticket_type_id: Uuid, quantity: i64, email: &str, key: &str) -> PurchaseRequest {
    PurchaseRequest {
        event_id: None,
        ticket_type_id: ticket_type_id.into(),
        quantity: Quantity::new(quantity).unwrap(),
        email: Email::parse(email).unwrap(),
        idempotency_key: IdempotencyKey::parse(key).unwrap(),
        pass: None,
        queue_entry: None,
        presale_code: None,
        client: None,
    }
}

/// A new idempotency key.
pub fn fresh_key() -> String {
    Uuid::new_v4().to_string()
}

/// A purchase of `quantity` tickets by `email` under a fresh key.
pub fn purchase_request(ticket_type_id: Uuid, quantity: i64, email: &str) -> PurchaseRequest {
    request(ticket_type_id, quantity, email, &fresh_key())
}

/// Buy through the library's purchase path, at `now`.
pub async fn buy(
    pool: &PgPool,
    now: OffsetDateTime,
    request: &PurchaseRequest,
) -> Result<Purchase, AppError> {
    sale::purchase(pool, now, request).await
}

/// Nothing of any purchase of this ticket type is in the tables: no order,
/// no ticket, no buyer holding, and all of its capacity left.
pub async fn assert_nothing_sold(pool: &PgPool, ticket_type_id: Uuid) {
    let (orders, tickets, held, capacity, remaining): (i64, i64, i64, i32, i32) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM orders WHERE ticket_type_id = $1),
                (SELECT count(*) FROM tickets k JOIN orders o ON o.id = k.order_id
                 WHERE o.ticket_type_id = $1),
                (SELECT COALESCE(SUM(quantity), 0)::int8 FROM buyer_holdings WHERE ticket_type_id = $1),
                capacity, remaining
         FROM ticket_types WHERE id = $1",
    )
    .bind(ticket_type_id)
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(
        (orders, tickets, held, remaining),
        (0, 0, 0, capacity),
        "(orders, tickets, held, remaining) of ticket type {ticket_type_id}"
    );
}
