//! The purchase path, all of it: idempotency, limits, the stock decrement.
//!
//! A sale is one Postgres transaction at Read Committed:
//! 1. insert the order (unique per buyer and idempotency key: a concurrent
//!    duplicate waits here and then replays the winner's order) and its
//!    tickets, one row per seat with an unguessable code;
//! 2. add the quantity to the buyer's holdings with a conditional upsert
//!    (the per-buyer limit, enforced on one row per buyer and ticket type);
//! 3. the conditional `UPDATE ticket_types SET remaining = remaining - $n
//!    WHERE id = $1 AND remaining - $n >= 0` plus the sale window and the
//!    `sales_halted` flag — exactly one row, or roll back. It runs last, so the hot row stays locked only
//!    for the commit.
//!
//! A blocked UPDATE re-checks its WHERE clause against the row version that
//! the other transaction committed, so no interleaving can oversell. There
//! are no application-side locks: any number of instances may share one
//! database. Before the transaction, one read (the key's order, if any, and
//! the ticket type's state) replays earlier purchases and refuses requests
//! that cannot succeed (not open, too many, sold out) without a write; the
//! transaction re-checks everything itself.

use sqlx::PgPool;
use time::OffsetDateTime;
use tracing::Instrument;
use uuid::Uuid;

use crate::{
    db,
    domain::{Email, EventStatus, IdempotencyKey, Quantity},
    error::AppError,
};

/// A validated purchase: every field already parsed into its domain type.
#[derive(Debug, Clone)]
pub struct PurchaseRequest {
    /// Set when buying from an event's page: the ticket type must belong to it.
    pub event_id: Option<Uuid>,
    pub ticket_type_id: Uuid,
    pub quantity: Quantity,
    pub email: Email,
    pub idempotency_key: IdempotencyKey,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Order {
    pub id: Uuid,
    pub ticket_type_id: Uuid,
    pub email: String,
    pub quantity: i32,
    pub status: String,
    pub unit_price_minor: i64,
    pub currency: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// The outcome of a purchase that holds tickets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Purchase {
    /// This request wrote the order.
    Created(Order),
    /// An earlier request with the same buyer and key did; this is its order.
    Replayed(Order),
}

impl Purchase {
    pub fn order(&self) -> &Order {
        match self {
            Self::Created(order) | Self::Replayed(order) => order,
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
        Ok(Purchase::Created(_)) => "created",
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
    let (existing, info) = precheck(db, request).await?;
    if let Some(existing) = existing {
        return replay(existing, request);
    }
    let info = info.ok_or(AppError::NotFound)?;
    info.refusal(now, request.quantity)?;

    let mut tx = db.begin().await?;
    let quantity = request.quantity.get();

    // 1. The order row; ON CONFLICT waits for a concurrent twin to finish.
    let order = sqlx::query_as!(
        Order,
        r#"INSERT INTO orders (ticket_type_id, email, quantity, idempotency_key, unit_price_minor, currency)
           SELECT t.id, $2, $3, $4, t.price_minor, t.currency FROM ticket_types t WHERE t.id = $1
           ON CONFLICT ON CONSTRAINT orders_buyer_idempotency_key DO NOTHING
           RETURNING id, ticket_type_id, email, quantity, status, unit_price_minor, currency, created_at"#,
        request.ticket_type_id,
        request.email.as_str(),
        quantity,
        request.idempotency_key.as_str(),
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(order) = order else {
        tx.rollback().await?;
        return match find_by_key(db, &request.email, &request.idempotency_key).await? {
            Some(existing) => replay(existing, request),
            None => Err(AppError::NotFound),
        };
    };

    // One ticket row per seat, each with its own code for the door.
    sqlx::query!(
        "INSERT INTO tickets (order_id, position) SELECT $1, generate_series(1, $2)",
        order.id,
        quantity,
    )
    .execute(&mut *tx)
    .await?;

    // 2. The per-buyer limit, on the buyer's own row (concurrent purchases by
    //    one buyer queue on it; a blocked upsert re-reads the new total).
    let held = sqlx::query_scalar!(
        r#"INSERT INTO buyer_holdings (ticket_type_id, email, quantity)
           SELECT t.id, $2, $3 FROM ticket_types t WHERE t.id = $1 AND $3 <= t.max_per_buyer
           ON CONFLICT (ticket_type_id, email) DO UPDATE
               SET quantity = buyer_holdings.quantity + EXCLUDED.quantity
               WHERE buyer_holdings.quantity + EXCLUDED.quantity
                     <= (SELECT max_per_buyer FROM ticket_types WHERE id = EXCLUDED.ticket_type_id)
           RETURNING quantity"#,
        request.ticket_type_id,
        request.email.as_str(),
        quantity,
    )
    .fetch_optional(&mut *tx)
    .await?;
    if held.is_none() {
        tx.rollback().await?;
        return Err(AppError::BuyerLimit {
            max: info.max_per_buyer,
        });
    }

    // 3. The stock: one row affected or nothing is sold.
    let remaining = sqlx::query_scalar!(
        r#"UPDATE ticket_types t SET remaining = t.remaining - $2
           FROM events e
           WHERE t.id = $1 AND t.remaining - $2 >= 0
             AND $2 <= t.max_per_order AND NOT t.sales_halted
             AND e.id = t.event_id AND e.status = 'published'
             AND e.sale_opens_at <= $3 AND (e.sale_closes_at IS NULL OR e.sale_closes_at > $3)
           RETURNING t.remaining"#,
        request.ticket_type_id,
        quantity,
        now,
    )
    .fetch_optional(&mut *tx)
    .await?;
    if remaining.is_none() {
        tx.rollback().await?;
        let info = SaleInfo::load(db, request.ticket_type_id)
            .await?
            .ok_or(AppError::NotFound)?;
        info.refusal(now, request.quantity)?;
        // Everything looks fine again: tickets came back after we lost a race.
        return Err(AppError::NotEnoughLeft {
            remaining: info.remaining,
        });
    }
    tx.commit().await?;
    tracing::debug!(order_id = %order.id, "order committed");
    Ok(Purchase::Created(order))
}

/// Cancel a confirmed order and return its tickets to sale, in one
/// transaction. The status check in the UPDATE makes a second cancel (even a
/// concurrent one) a no-op that reports [`AppError::AlreadyCancelled`].
#[tracing::instrument(skip(db))]
pub async fn cancel(db: &PgPool, order_id: Uuid) -> Result<Order, AppError> {
    let mut tx = db.begin().await?;
    let order = sqlx::query_as!(
        Order,
        r#"UPDATE orders SET status = 'cancelled', cancelled_at = now()
           WHERE id = $1 AND status = 'confirmed'
           RETURNING id, ticket_type_id, email, quantity, status, unit_price_minor, currency, created_at"#,
        order_id,
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(order) = order else {
        tx.rollback().await?;
        return match find_by_id(db, order_id).await? {
            Some(_) => Err(AppError::AlreadyCancelled),
            None => Err(AppError::NotFound),
        };
    };
    sqlx::query!(
        "UPDATE buyer_holdings SET quantity = quantity - $3 WHERE ticket_type_id = $1 AND email = $2",
        order.ticket_type_id,
        order.email,
        order.quantity,
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(
        "UPDATE ticket_types SET remaining = remaining + $2 WHERE id = $1",
        order.ticket_type_id,
        order.quantity,
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(order)
}

/// The buyer's order for this key, if any, and the ticket type's sale
/// state, read in one statement (one snapshot, one round trip).
async fn precheck(
    db: &PgPool,
    request: &PurchaseRequest,
) -> Result<(Option<Order>, Option<SaleInfo>), AppError> {
    let row = sqlx::query!(
        r#"SELECT o.id AS "order_id?", o.ticket_type_id AS "order_ticket_type_id?", o.email AS "order_email?",
                  o.quantity AS "order_quantity?", o.status AS "order_status?",
                  o.unit_price_minor AS "order_unit_price_minor?", o.currency AS "order_currency?",
                  o.created_at AS "order_created_at?",
                  t.remaining AS "remaining?", t.max_per_order AS "max_per_order?",
                  t.max_per_buyer AS "max_per_buyer?", e.status AS "event_status?",
                  e.sale_opens_at AS "sale_opens_at?", e.sale_closes_at
           FROM (VALUES (1)) AS one (x)
           LEFT JOIN orders o ON o.email = $2 AND o.idempotency_key = $3
           LEFT JOIN ticket_types t ON t.id = $1 AND ($4::uuid IS NULL OR t.event_id = $4)
           LEFT JOIN events e ON e.id = t.event_id"#,
        request.ticket_type_id,
        request.email.as_str(),
        request.idempotency_key.as_str(),
        request.event_id as Option<Uuid>,
    )
    .fetch_one(db)
    .await?;
    let order = match (
        row.order_id,
        row.order_ticket_type_id,
        row.order_email,
        row.order_quantity,
        row.order_status,
        row.order_unit_price_minor,
        row.order_currency,
        row.order_created_at,
    ) {
        (
            Some(id),
            Some(ticket_type_id),
            Some(email),
            Some(quantity),
            Some(status),
            Some(unit_price_minor),
            Some(currency),
            Some(created_at),
        ) => Some(Order {
            id,
            ticket_type_id,
            email,
            quantity,
            status,
            unit_price_minor,
            currency,
            created_at,
        }),
        _ => None,
    };
    let info = match (
        row.remaining,
        row.max_per_order,
        row.max_per_buyer,
        row.event_status,
        row.sale_opens_at,
    ) {
        (
            Some(remaining),
            Some(max_per_order),
            Some(max_per_buyer),
            Some(status),
            Some(sale_opens_at),
        ) => Some(SaleInfo {
            remaining,
            max_per_order,
            max_per_buyer,
            status,
            sale_opens_at,
            sale_closes_at: row.sale_closes_at,
        }),
        _ => None,
    };
    Ok((order, info))
}

/// Cancel an event: stop its sales, then cancel every live order and return
/// the tickets. Two transactions, each taking its locks in the order that
/// purchases and order cancellations do (orders, then buyer holdings, then
/// the ticket type), so neither can deadlock with them:
/// 1. mark the event cancelled and set `sales_halted` on its ticket types.
///    Taking those row locks waits for purchases holding them to commit;
///    purchases that come later re-check `sales_halted` and refuse;
/// 2. cancel the live orders, zero the buyers' holdings and restore
///    `remaining`. No purchase can succeed any more, so this is final; it
///    is safe to repeat, and calling this again finishes an interrupted run.
#[tracing::instrument(skip(db))]
pub async fn cancel_event(
    db: &PgPool,
    organizer_id: Uuid,
    event_id: Uuid,
) -> Result<u64, AppError> {
    db::events::find_owned(db, organizer_id, event_id).await?;

    let mut tx = db.begin().await?;
    sqlx::query!(
        "UPDATE events SET status = 'cancelled', updated_at = now()
         WHERE id = $1 AND organizer_id = $2 AND status <> 'cancelled'",
        event_id,
        organizer_id,
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(
        "UPDATE ticket_types SET sales_halted = true WHERE event_id = $1 AND NOT sales_halted",
        event_id
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;

    let mut tx = db.begin().await?;
    let cancelled = sqlx::query!(
        "UPDATE orders o SET status = 'cancelled', cancelled_at = now()
         FROM ticket_types t
         WHERE t.id = o.ticket_type_id AND t.event_id = $1 AND o.status = 'confirmed'",
        event_id,
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    sqlx::query!(
        "UPDATE buyer_holdings h SET quantity = 0 FROM ticket_types t
         WHERE t.id = h.ticket_type_id AND t.event_id = $1 AND h.quantity <> 0",
        event_id,
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(
        "UPDATE ticket_types SET remaining = capacity WHERE event_id = $1",
        event_id
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    tracing::info!(%event_id, cancelled, "event cancelled");
    Ok(cancelled)
}

pub async fn find_by_id(db: &PgPool, order_id: Uuid) -> Result<Option<Order>, AppError> {
    Ok(sqlx::query_as!(
        Order,
        "SELECT id, ticket_type_id, email, quantity, status, unit_price_minor, currency, created_at
         FROM orders WHERE id = $1",
        order_id,
    )
    .fetch_optional(db)
    .await?)
}

async fn find_by_key(
    db: &PgPool,
    email: &Email,
    key: &IdempotencyKey,
) -> Result<Option<Order>, AppError> {
    Ok(sqlx::query_as!(
        Order,
        "SELECT id, ticket_type_id, email, quantity, status, unit_price_minor, currency, created_at
         FROM orders WHERE email = $1 AND idempotency_key = $2",
        email.as_str(),
        key.as_str(),
    )
    .fetch_optional(db)
    .await?)
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

/// What decides whether a purchase may go ahead, read in one query.
#[derive(Debug)]
struct SaleInfo {
    remaining: i32,
    max_per_order: i32,
    max_per_buyer: i32,
    status: String,
    sale_opens_at: OffsetDateTime,
    sale_closes_at: Option<OffsetDateTime>,
}

impl SaleInfo {
    async fn load(db: &PgPool, ticket_type_id: Uuid) -> Result<Option<Self>, AppError> {
        Ok(sqlx::query_as!(
            SaleInfo,
            "SELECT t.remaining, t.max_per_order, t.max_per_buyer, e.status, e.sale_opens_at, e.sale_closes_at
             FROM ticket_types t JOIN events e ON e.id = t.event_id
             WHERE t.id = $1",
            ticket_type_id,
        )
        .fetch_optional(db)
        .await?)
    }

    /// Why this purchase cannot succeed now, if it cannot.
    fn refusal(&self, now: OffsetDateTime, quantity: Quantity) -> Result<(), AppError> {
        match EventStatus::from_db(&self.status) {
            EventStatus::Draft => return Err(AppError::NotFound),
            EventStatus::Cancelled => {
                return Err(AppError::SaleClosed("This event was cancelled."));
            }
            EventStatus::Published => {}
        }
        if now < self.sale_opens_at {
            return Err(AppError::SaleNotOpen {
                opens_at: self.sale_opens_at,
            });
        }
        if self.sale_closes_at.is_some_and(|closes| now >= closes) {
            return Err(AppError::SaleClosed("The sale for this event has closed."));
        }
        if quantity.get() > self.max_per_order {
            return Err(AppError::OrderLimit {
                max: self.max_per_order,
            });
        }
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
