//! A batch's reads and its one write, inside its transaction: the rows it
//! decides on ([`Locked`], the orders of its keys, its presale codes, its
//! buyers' holdings) and the statement that writes what it sold.

use std::collections::{HashMap, HashSet};

use sqlx::{Postgres, Transaction};
use time::OffsetDateTime;

use super::{job::Job, unproven::JobHold};
use crate::{
    domain::{BuyerKey, BuyerLimits, CancelSecret, ConfirmKey, OrderId, OrderStatus, TicketTypeId},
    error::AppError,
    sale::{order::Order, request::PurchaseRequest},
};

/// An order's buyer and idempotency key: what makes a purchase the same one
/// (the key of [`existing_orders`] and of [`Written::orders`]).
pub(super) fn order_key(request: &PurchaseRequest) -> (String, String) {
    (
        request.email.as_str().to_owned(),
        request.idempotency_key.as_str().to_owned(),
    )
}

/// The ticket type's row, read under its lock.
pub(super) struct Locked {
    pub(super) event_id: uuid::Uuid,
    pub(super) remaining: i32,
    pub(super) max_per_order: i32,
    pub(super) max_per_buyer: i32,
    pub(super) sales_halted: bool,
    pub(super) price_minor: i64,
    pub(super) currency: String,
    /// Sold only with a presale code that unlocks it.
    pub(super) hidden: bool,
}

/// A presale code named in the batch, read under its row lock.
#[derive(Debug, Clone)]
pub(super) struct CodeRow {
    pub(super) id: uuid::Uuid,
    /// Uses (tickets) left.
    pub(super) left: i32,
    pub(super) valid_from: Option<OffsetDateTime>,
    pub(super) valid_until: Option<OffsetDateTime>,
    /// It unlocks this batch's ticket type.
    pub(super) unlocks: bool,
}

pub(super) async fn existing_orders(
    db: impl sqlx::PgExecutor<'_>,
    emails: &[&str],
    keys: &[&str],
) -> Result<HashMap<(String, String), Order>, AppError> {
    let rows = sqlx::query_file!(
        "sql/sale/existing_orders.sql",
        emails as &[&str],
        keys as &[&str],
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| {
            (
                (row.email.clone(), row.idempotency_key),
                Order {
                    id: row.id.into(),
                    ticket_type_id: row.ticket_type_id.into(),
                    email: row.email,
                    quantity: row.quantity,
                    status: row.status,
                    unit_price_minor: row.unit_price_minor,
                    currency: row.currency,
                    created_at: row.created_at,
                    hold_expires_at: row.hold_expires_at,
                },
            )
        })
        .collect())
}

/// The presale codes the batch's requests name, locked (in id order, after
/// the ticket type's row, as the single path takes them), by code; no read
/// when none names one.
pub(super) async fn codes(
    tx: &mut Transaction<'_, Postgres>,
    ticket_type_id: TicketTypeId,
    event_id: uuid::Uuid,
    jobs: &[Job],
) -> Result<HashMap<String, CodeRow>, AppError> {
    let mut named: Vec<&str> = jobs
        .iter()
        .filter_map(|j| j.request.presale_code.as_ref().map(|c| c.as_str()))
        .collect();
    if named.is_empty() {
        return Ok(HashMap::new());
    }
    named.sort_unstable();
    named.dedup();
    let rows = sqlx::query_file!(
        "sql/sale/batch_codes.sql",
        event_id,
        ticket_type_id.get(),
        &named as &[&str],
    )
    .fetch_all(&mut **tx)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| {
            (
                row.code,
                CodeRow {
                    id: row.id,
                    left: row.left,
                    valid_from: row.valid_from,
                    valid_until: row.valid_until,
                    unlocks: row.unlocks,
                },
            )
        })
        .collect())
}

/// What the batch's buyers hold already, by buyer key: of this ticket type,
/// and in the whole event.
#[derive(Debug, Default)]
pub(super) struct Held {
    pub(super) of_type: HashMap<String, i32>,
    pub(super) in_event: HashMap<String, i32>,
}

pub(super) async fn holdings(
    tx: &mut Transaction<'_, Postgres>,
    ticket_type_id: TicketTypeId,
    event_id: uuid::Uuid,
    buyers: &[BuyerKey],
) -> Result<Held, AppError> {
    let keys: Vec<&str> = buyers.iter().map(BuyerKey::as_str).collect();
    let rows = sqlx::query_file!(
        "sql/sale/batch_holdings.sql",
        ticket_type_id.get(),
        event_id,
        &keys as &[&str],
    )
    .fetch_all(&mut **tx)
    .await?;
    let mut held = Held::default();
    for row in rows {
        let (Some(key), Some(quantity)) = (row.buyer_key, row.quantity) else {
            continue;
        };
        match row.scope.as_str() {
            "type" => held.of_type.insert(key, quantity),
            _ => held.in_event.insert(key, quantity),
        };
    }
    Ok(held)
}

/// How a holding event's batch holds what it sells: the event's hold, the
/// key of the confirmation tokens, and each sale's own hold (in the order
/// of the sales).
pub(super) struct Hold<'a> {
    pub(super) seconds: i32,
    pub(super) key: &'a ConfirmKey,
    pub(super) sales: &'a [JobHold],
}

#[derive(Default)]
pub(super) struct Written {
    /// By buyer and idempotency key: the order and its cancel secret.
    pub(super) orders: HashMap<(String, String), (Order, CancelSecret)>,
    pub(super) remaining: Option<i32>,
}

/// The batch's writes in one statement. Its guards repeat the decisions:
/// if the stock `UPDATE` or a holdings upsert refuses, the batch is wrong
/// and rolls back (the caller then sells each request alone). Holdings rows
/// are written in buyer key order, so that two batches of one event (two
/// ticket types) take their locks in the same order. With `hold` (the
/// event's hold in seconds), the orders are held: their ids and token
/// hashes are made here.
pub(super) async fn write(
    tx: &mut Transaction<'_, Postgres>,
    ticket_type_id: TicketTypeId,
    locked: &Locked,
    limits: BuyerLimits,
    hold: Option<Hold<'_>>,
    selling: &[(&Job, &BuyerKey)],
    code_ids: &[Option<uuid::Uuid>],
) -> Result<Written, AppError> {
    // Without any code, an empty array: unnest pads it with NULLs.
    let code_ids: &[Option<uuid::Uuid>] = if code_ids.iter().all(Option::is_none) {
        &[]
    } else {
        code_ids
    };

    let (ids, token_hashes): (Vec<uuid::Uuid>, Vec<Vec<u8>>) = match hold {
        Some(Hold { key, .. }) => selling
            .iter()
            .map(|_| {
                let id = uuid::Uuid::new_v4();
                (id, key.token(OrderId::from(id)).hash())
            })
            .unzip(),
        None => (Vec::new(), Vec::new()),
    };
    let secrets: Vec<CancelSecret> = selling.iter().map(|_| CancelSecret::generate()).collect();
    let emails: Vec<&str> = selling
        .iter()
        .map(|(j, _)| j.request.email.as_str())
        .collect();
    let quantities: Vec<i32> = selling
        .iter()
        .map(|(j, _)| j.request.quantity.get())
        .collect();
    let keys: Vec<&str> = selling
        .iter()
        .map(|(j, _)| j.request.idempotency_key.as_str())
        .collect();
    let hashes: Vec<Vec<u8>> = secrets.iter().map(CancelSecret::hash).collect();
    let buyer_keys: Vec<&str> = selling.iter().map(|(_, b)| b.as_str()).collect();
    // The waiting room's entries spent (NULL for events without a room).
    let entries: Vec<Option<uuid::Uuid>> = selling
        .iter()
        .map(|(j, _)| j.request.queue_entry.map(|e| e.get()))
        .collect();
    // Unproven mailboxes' shorter holds and their addresses (empty arrays
    // for an event without holds: unnest pads them with NULLs).
    let holds = hold.as_ref().map_or(&[][..], |h| h.sales);
    let hold_secs: Vec<Option<i32>> = holds.iter().map(|h| h.secs).collect();
    let addresses: Vec<Option<&str>> = holds.iter().map(|h| h.address.as_deref()).collect();
    let largest = quantities.iter().copied().max().unwrap_or(0);
    let latest = selling.iter().map(|(j, _)| j.now).max();
    let rows = sqlx::query_file!(
        "sql/sale/batch_write.sql",
        ticket_type_id.get(),
        &emails as &[&str],
        &quantities,
        &keys as &[&str],
        locked.price_minor,
        locked.currency,
        limits.per_ticket_type,
        largest,
        latest,
        &hashes,
        &buyer_keys as &[&str],
        locked.event_id,
        limits.per_event,
        &entries as &[Option<uuid::Uuid>],
        &ids,
        &token_hashes,
        hold.as_ref().map(|h| h.seconds),
        code_ids as &[Option<uuid::Uuid>],
        &hold_secs as &[Option<i32>],
        &addresses as &[Option<&str>],
    )
    .fetch_all(&mut **tx)
    .await?;

    let written_buyers: HashSet<&str> = rows
        .iter()
        .filter_map(|r| {
            selling
                .iter()
                .find(|(j, _)| {
                    j.request.email.as_str() == r.email
                        && j.request.idempotency_key.as_str() == r.idempotency_key
                })
                .map(|(_, b)| b.as_str())
        })
        .collect();
    let remaining = rows.first().and_then(|r| r.remaining);
    let codes_used = rows
        .iter()
        .filter_map(|r| r.presale_code_id)
        .collect::<HashSet<_>>()
        .len() as i64;
    if let Some(first) = rows.first() {
        let buyers = written_buyers.len() as i64;
        if first.held != buyers
            || first.held_in_event != buyers
            || remaining.is_none()
            || first.coded != codes_used
        {
            return Err(AppError::internal(anyhow::anyhow!(
                "a batch write was refused by its guards: {buyers} buyers, {} + {} holdings, stock {remaining:?}, {} of {codes_used} codes",
                first.held,
                first.held_in_event,
                first.coded,
            )));
        }
    }
    let mut secrets: HashMap<(String, String), CancelSecret> = selling
        .iter()
        .zip(secrets)
        .map(|((job, _), secret)| (order_key(&job.request), secret))
        .collect();
    let orders = rows
        .into_iter()
        .filter_map(|row| {
            let key = (row.email.clone(), row.idempotency_key);
            let secret = secrets.remove(&key)?;
            let order = Order {
                id: OrderId::from(row.id),
                ticket_type_id,
                email: row.email,
                quantity: row.quantity,
                status: row.status,
                unit_price_minor: locked.price_minor,
                currency: locked.currency.clone(),
                created_at: row.created_at,
                hold_expires_at: row.hold_expires_at,
            };
            Some((key, (order, secret)))
        })
        .collect();
    Ok(Written { orders, remaining })
}
