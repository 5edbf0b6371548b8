//! One transaction per purchase: the `naive` and `for-update` strategies
//! (see [`super::strategy::Strategy`]). The engine's batches fall back to this path
//! when a batch as a whole fails, so that one bad request fails alone.
//!
//! The transaction, at Read Committed:
//! 1. insert the order (unique per buyer and idempotency key: a concurrent
//!    duplicate waits here and then replays the winner's order) and its
//!    tickets, one row per seat with an unguessable code;
//! 2. add the quantity to the buyer's holdings with conditional upserts:
//!    the per-buyer limit of the ticket type, on one row per (ticket type,
//!    buyer key), and the event's optional limit across its ticket types, on
//!    one row per (event, buyer key). The buyer key is the folded email
//!    (`domain::BuyerKey`); the order keeps the email as given;
//! 3. the conditional `UPDATE ticket_types SET remaining = remaining - $n
//!    WHERE id = $1 AND remaining - $n >= 0` plus the sale window
//!    (`sale_open(...)`, the SQL twin of `domain::SaleWindow`) and the
//!    `sales_halted` flag — exactly one row, or roll back. It runs last, so
//!    the hot row stays locked only for the commit.
//!
//! 4. for a hold of a mailbox not yet proven (`super::holds::HoldRules`),
//!    the client address's unconfirmed holds in the event, counted under
//!    its advisory lock, after the row lock as the engine's batches take it.
//!
//! A blocked UPDATE re-checks its WHERE clause against the row version that
//! the other transaction committed, so no interleaving can oversell.

use sqlx::PgPool;
use time::OffsetDateTime;

use super::{
    check::SaleCheck,
    holds::Holding,
    order::{Order, find_by_id},
    outcome::Purchase,
    replay::{replay, replay_by_key},
    request::PurchaseRequest,
    round_trips::postgres_round,
};
use crate::{
    domain::{BuyerKey, CancelSecret, OrderId, OrderStatus, PresaleCode, code_is_current},
    error::AppError,
};

/// When the ticket type row is locked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Locking {
    /// By the conditional UPDATE, last (`naive`).
    AtTheEnd,
    /// By `SELECT ... FOR UPDATE`, first (`for-update`).
    RowLockFirst,
}

pub(super) async fn purchase(
    db: &PgPool,
    holding: &Holding,
    now: OffsetDateTime,
    request: &PurchaseRequest,
    locking: Locking,
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
    if check.hidden && request.presale_code.is_none() {
        // Invisible without a code: as if it did not exist.
        return Err(AppError::NotFound);
    }

    postgres_round("single");
    let mut tx = db.begin().await?;
    let quantity = request.quantity.get();
    if locking == Locking::RowLockFirst {
        // The `for-update` baseline: hold the hot row for the whole transaction.
        sqlx::query_file_scalar!(
            "sql/sale/lock_ticket_type.sql",
            request.ticket_type_id.get(),
        )
        .fetch_optional(&mut *tx)
        .await?;
    }
    // 0. The presale code's uses, on its own row (after the ticket type's
    //    row when that is locked first, as the engine's batches do).
    let code_id = match &request.presale_code {
        None => None,
        Some(code) => {
            let taken = sqlx::query_file_scalar!(
                "sql/sale/take_code.sql",
                request.ticket_type_id.get(),
                code.as_str(),
                quantity,
                now,
            )
            .fetch_optional(&mut *tx)
            .await?;
            if taken.is_none() {
                tx.rollback().await?;
                return Err(code_refusal(db, request, code, now).await?);
            }
            taken
        }
    };
    let cancel_secret = CancelSecret::generate();
    let buyer = BuyerKey::from(&request.email);
    // Used only if the event holds its orders (the statement decides).
    let order_id = OrderId::from(uuid::Uuid::new_v4());
    let token_hash = holding.key.token(order_id).hash();
    let rules = holding.rules;
    let address = request
        .client
        .filter(|_| rules.per_address > 0)
        .map(|client| client.to_string());

    // 1. The order row; ON CONFLICT waits for a concurrent twin to finish.
    let order = sqlx::query_file_as!(
        Order,
        "sql/sale/insert_order.sql",
        request.ticket_type_id.get(),
        request.email.as_str(),
        quantity,
        request.idempotency_key.as_str(),
        cancel_secret.hash(),
        buyer.as_str(),
        request.queue_entry.map(|entry| entry.get()),
        order_id.get(),
        token_hash,
        now,
        code_id,
        rules.unproven_secs(),
        address,
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(order) = order else {
        tx.rollback().await?;
        return replay_by_key(db, request).await;
    };

    // One ticket row per seat, each with its own code for the door; a held
    // order gets them when it is confirmed.
    if order.status == OrderStatus::Confirmed {
        sqlx::query_file!("sql/sale/insert_tickets.sql", order.id.get(), quantity,)
            .execute(&mut *tx)
            .await?;
    }

    // 2. The per-buyer limits, on the buyer key's own rows (concurrent
    //    purchases by one buyer queue on them; a blocked upsert re-reads the
    //    new total). First the ticket type's limit...
    let held = sqlx::query_file_scalar!(
        "sql/sale/hold_ticket_type.sql",
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
    let held_in_event = sqlx::query_file_scalar!(
        "sql/sale/hold_event.sql",
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
    let remaining = sqlx::query_file_scalar!(
        "sql/sale/take_stock.sql",
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
    // 4. An unproven mailbox's hold, against its address's cap.
    if order.status == OrderStatus::Held
        && let Err(err) = held_by_address_within(&mut tx, order.id, rules.per_address).await
    {
        tx.rollback().await?;
        return Err(err);
    }
    tx.commit().await?;
    tracing::debug!(order_id = %order.id, "order committed");
    Ok(Purchase::Created {
        order,
        cancel_secret,
    })
}

/// With the order held for an unproven mailbox (it has `held_by_address`),
/// its address's unconfirmed tickets in the event, counted under the
/// address's lock, must stay within `cap`; beyond, nothing is written.
async fn held_by_address_within(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    order_id: OrderId,
    cap: i32,
) -> Result<(), AppError> {
    let Some(held) = sqlx::query_file!("sql/sale/order_address.sql", order_id.get())
        .fetch_optional(&mut **tx)
        .await?
    else {
        return Ok(());
    };
    let addresses = [held.address];
    sqlx::query_file!("sql/sale/lock_address.sql", held.event_id, &addresses[..])
        .fetch_one(&mut **tx)
        .await?;
    let holding = sqlx::query_file!("sql/sale/address_holds.sql", held.event_id, &addresses[..])
        .fetch_optional(&mut **tx)
        .await?
        .map_or(0, |row| row.quantity);
    if holding > cap {
        return Err(AppError::UnconfirmedHoldLimit { max: cap });
    }
    Ok(())
}

/// Why a presale code refused this purchase: not valid for it (or not now),
/// or too few uses left.
async fn code_refusal(
    db: &PgPool,
    request: &PurchaseRequest,
    code: &PresaleCode,
    now: OffsetDateTime,
) -> Result<AppError, AppError> {
    let row = sqlx::query_file!(
        "sql/sale/code_refusal.sql",
        request.ticket_type_id.get(),
        code.as_str(),
    )
    .fetch_optional(db)
    .await?;
    Ok(match row {
        // Used up answers as an unknown code does (see batch/decide.rs).
        Some(row)
            if row.left > 0
                && row.unlocks
                && code_is_current(row.valid_from, row.valid_until, now) =>
        {
            AppError::CodeUsedUp { left: row.left }
        }
        _ => AppError::code_not_valid(),
    })
}
