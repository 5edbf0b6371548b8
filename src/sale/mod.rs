//! The purchase path, all of it: idempotency, limits, the stock decrement.
//!
//! A sale is one Postgres transaction at Read Committed:
//! 1. insert the order (unique per buyer and idempotency key: a concurrent
//!    duplicate waits here and then replays the winner's order) and its
//!    tickets, one row per seat with an unguessable code;
//! 2. add the quantity to the buyer's holdings with conditional upserts:
//!    the per-buyer limit of the ticket type, on one row per (ticket type,
//!    buyer key), and the event's optional limit across its ticket types, on
//!    one row per (event, buyer key). The buyer key is the folded email
//!    ([`BuyerKey`]); the order keeps the email as given;
//! 3. the conditional `UPDATE ticket_types SET remaining = remaining - $n
//!    WHERE id = $1 AND remaining - $n >= 0` plus the sale window
//!    (`sale_open(...)`, the SQL twin of `domain::SaleWindow`, on the
//!    event's status and window as copied onto the row) and the
//!    `sales_halted` flag — exactly one row, or roll back. It runs last, so
//!    the hot row stays locked only for the commit.
//!
//! A blocked UPDATE re-checks its WHERE clause against the row version that
//! the other transaction committed, so no interleaving can oversell. There
//! are no application-side locks: any number of instances may share one
//! database. Before the transaction, one read ([`check::SaleCheck`]: the
//! key's order, if any, and the ticket type's state) replays earlier
//! purchases and refuses requests that cannot succeed (not open, too many,
//! sold out) without a write; the transaction re-checks everything itself.
//!
//! Cancelling orders and events is [`cancel`].

mod cancel;
mod check;

use sqlx::PgPool;
use time::OffsetDateTime;
use tracing::Instrument;

pub use cancel::{cancel, cancel_event};
use check::SaleCheck;

use crate::{
    domain::{
        BuyerKey, CancelSecret, Email, EventId, IdempotencyKey, OrderId, OrderStatus, Quantity,
        TicketTypeId,
    },
    error::AppError,
};

/// A validated purchase: every field already parsed into its domain type.
#[derive(Debug, Clone)]
pub struct PurchaseRequest {
    /// Set when buying from an event's page: the ticket type must belong to it.
    pub event_id: Option<EventId>,
    pub ticket_type_id: TicketTypeId,
    pub quantity: Quantity,
    pub email: Email,
    pub idempotency_key: IdempotencyKey,
}

/// An order row, as the sale path and the API see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    pub id: OrderId,
    pub ticket_type_id: TicketTypeId,
    pub email: String,
    pub quantity: i32,
    pub status: OrderStatus,
    pub unit_price_minor: i64,
    pub currency: String,
    pub created_at: OffsetDateTime,
}

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

/// Sell `quantity` tickets of one type to one buyer, or refuse with a reason.
pub async fn purchase(
    db: &PgPool,
    now: OffsetDateTime,
    request: &PurchaseRequest,
) -> Result<Purchase, AppError> {
    let span = tracing::info_span!(
        "purchase",
        ticket_type_id = %request.ticket_type_id,
        quantity = request.quantity.get(),
        outcome = tracing::field::Empty,
    );
    let result = purchase_inner(db, now, request)
        .instrument(span.clone())
        .await;
    let outcome = match &result {
        Ok(Purchase::Created { .. }) => "created",
        Ok(Purchase::Replayed(_)) => "replayed",
        Err(err) => err.code(),
    };
    span.record("outcome", outcome);
    result
}

async fn purchase_inner(
    db: &PgPool,
    now: OffsetDateTime,
    request: &PurchaseRequest,
) -> Result<Purchase, AppError> {
    // One snapshot answers both "was this key used?" and "can this succeed?":
    // a twin request either committed (we see its order) or did not (we see
    // its tickets still in stock and meet it at the INSERT below).
    let Some(check) = SaleCheck::load(db, request).await? else {
        return replay_by_key(db, request).await;
    };
    if let Some(existing) = check.existing_order {
        let existing = find_by_id(db, existing).await?.ok_or(AppError::NotFound)?;
        return replay(existing, request);
    }
    check.refusal(now, request.quantity)?;

    let mut tx = db.begin().await?;
    let quantity = request.quantity.get();
    let cancel_secret = CancelSecret::generate();
    let buyer = BuyerKey::from(&request.email);

    // 1. The order row; ON CONFLICT waits for a concurrent twin to finish.
    let order = sqlx::query_as!(
        Order,
        r#"INSERT INTO orders (ticket_type_id, email, quantity, idempotency_key, unit_price_minor, currency,
                               cancel_secret_hash, buyer_key)
           SELECT t.id, $2, $3, $4, t.price_minor, t.currency, $5, $6 FROM ticket_types t WHERE t.id = $1
           ON CONFLICT ON CONSTRAINT orders_buyer_idempotency_key DO NOTHING
           RETURNING id, ticket_type_id, email, quantity, status AS "status: OrderStatus",
                     unit_price_minor, currency, created_at"#,
        request.ticket_type_id.get(),
        request.email.as_str(),
        quantity,
        request.idempotency_key.as_str(),
        cancel_secret.hash(),
        buyer.as_str(),
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(order) = order else {
        tx.rollback().await?;
        return replay_by_key(db, request).await;
    };

    // One ticket row per seat, each with its own code for the door.
    sqlx::query!(
        "INSERT INTO tickets (order_id, position) SELECT $1, generate_series(1, $2)",
        order.id.get(),
        quantity,
    )
    .execute(&mut *tx)
    .await?;

    // 2. The per-buyer limits, on the buyer key's own rows (concurrent
    //    purchases by one buyer queue on them; a blocked upsert re-reads the
    //    new total). First the ticket type's limit...
    let held = sqlx::query_scalar!(
        r#"INSERT INTO buyer_holdings (ticket_type_id, buyer_key, quantity)
           SELECT t.id, $2, $3 FROM ticket_types t WHERE t.id = $1 AND $3 <= t.max_per_buyer
           ON CONFLICT (ticket_type_id, buyer_key) DO UPDATE
               SET quantity = buyer_holdings.quantity + EXCLUDED.quantity
               WHERE buyer_holdings.quantity + EXCLUDED.quantity
                     <= (SELECT max_per_buyer FROM ticket_types WHERE id = EXCLUDED.ticket_type_id)
           RETURNING quantity"#,
        request.ticket_type_id.get(),
        buyer.as_str(),
        quantity,
    )
    .fetch_optional(&mut *tx)
    .await?;
    if held.is_none() {
        tx.rollback().await?;
        return Err(AppError::BuyerLimit {
            max: check.max_per_buyer,
        });
    }
    // ...then the event's, across its ticket types. The row is kept whether
    // or not the event has a limit, so a limit set later counts it all.
    let held_in_event = sqlx::query_scalar!(
        r#"INSERT INTO event_buyer_holdings (event_id, buyer_key, quantity)
           SELECT e.id, $2, $3 FROM ticket_types t JOIN events e ON e.id = t.event_id
           WHERE t.id = $1 AND $3 <= COALESCE(e.max_per_buyer, $3)
           ON CONFLICT (event_id, buyer_key) DO UPDATE
               SET quantity = event_buyer_holdings.quantity + EXCLUDED.quantity
               WHERE event_buyer_holdings.quantity + EXCLUDED.quantity
                     <= COALESCE((SELECT max_per_buyer FROM events WHERE id = EXCLUDED.event_id),
                                 event_buyer_holdings.quantity + EXCLUDED.quantity)
           RETURNING quantity"#,
        request.ticket_type_id.get(),
        buyer.as_str(),
        quantity,
    )
    .fetch_optional(&mut *tx)
    .await?;
    if held_in_event.is_none() {
        tx.rollback().await?;
        let max = SaleCheck::load(db, request)
            .await?
            .and_then(|check| check.event_max_per_buyer)
            .unwrap_or(0);
        return Err(AppError::EventBuyerLimit { max });
    }

    // 3. The stock: one row affected or nothing is sold. Every guard reads
    //    the ticket type row itself, never a joined `events` row: a purchase
    //    blocked on this row re-checks the WHERE clause against the version
    //    committed by whoever held it, and only this row is re-read. The
    //    event's status and window are copied onto the row by triggers
    //    (migrations/0004), so unpublishing, cancelling or closing the sale
    //    stops purchases already waiting here, with any number of instances.
    let remaining = sqlx::query_scalar!(
        r#"UPDATE ticket_types t SET remaining = t.remaining - $2
           WHERE t.id = $1 AND t.remaining - $2 >= 0
             AND $2 <= t.max_per_order AND NOT t.sales_halted
             AND sale_open(t.event_status, t.event_sale_opens_at, t.event_sale_closes_at,
                           t.event_starts_at, $3)
           RETURNING t.remaining"#,
        request.ticket_type_id.get(),
        quantity,
        now,
    )
    .fetch_optional(&mut *tx)
    .await?;
    if remaining.is_none() {
        tx.rollback().await?;
        let check = SaleCheck::load(db, request)
            .await?
            .ok_or(AppError::NotFound)?;
        check.refusal(now, request.quantity)?;
        // Everything looks fine again: tickets came back after we lost a race.
        return Err(AppError::NotEnoughLeft {
            remaining: check.remaining,
        });
    }
    tx.commit().await?;
    tracing::debug!(order_id = %order.id, "order committed");
    Ok(Purchase::Created {
        order,
        cancel_secret,
    })
}

/// How to find one order: by its id, or by its buyer and idempotency key.
#[derive(Debug, Clone, Copy)]
pub enum OrderRef<'a> {
    Id(OrderId),
    Key(&'a Email, &'a IdempotencyKey),
}

/// The one read of an order row.
pub async fn find(db: &PgPool, by: OrderRef<'_>) -> Result<Option<Order>, AppError> {
    let (id, email, key) = match by {
        OrderRef::Id(id) => (Some(id.get()), None, None),
        OrderRef::Key(email, key) => (None, Some(email.as_str()), Some(key.as_str())),
    };
    Ok(sqlx::query_as!(
        Order,
        r#"SELECT id, ticket_type_id, email, quantity, status AS "status: OrderStatus",
                  unit_price_minor, currency, created_at
           FROM orders WHERE id = $1 OR (email = $2 AND idempotency_key = $3)"#,
        id,
        email,
        key,
    )
    .fetch_optional(db)
    .await?)
}

pub async fn find_by_id(db: &PgPool, order_id: OrderId) -> Result<Option<Order>, AppError> {
    find(db, OrderRef::Id(order_id)).await
}

/// The buyer's earlier order for this key, replayed, or "not found".
async fn replay_by_key(db: &PgPool, request: &PurchaseRequest) -> Result<Purchase, AppError> {
    match find(db, OrderRef::Key(&request.email, &request.idempotency_key)).await? {
        Some(existing) => replay(existing, request),
        None => Err(AppError::NotFound),
    }
}

fn replay(existing: Order, request: &PurchaseRequest) -> Result<Purchase, AppError> {
    if existing.ticket_type_id == request.ticket_type_id
        && existing.quantity == request.quantity.get()
    {
        Ok(Purchase::Replayed(existing))
    } else {
        Err(AppError::IdempotencyConflict)
    }
}
