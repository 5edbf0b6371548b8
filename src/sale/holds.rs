//! Held orders: confirmed from the buyer's mailbox, or expired.
//!
//! An event may hold its orders (`events.hold_seconds`): the sale writes
//! them `held`, taking their stock and the buyer's limits exactly as it does
//! for a confirmed order, and the mailer (`crate::mail`) sends the buyer a
//! link with a token derived from the order id (`domain::ConfirmToken`).
//! Two things can end a hold, and the order row's lock makes them take turns:
//! - [`confirm`]: the link, before the expiry, makes the order confirmed
//!   and writes its tickets;
//! - [`expire_holds`]: a sweeper (one per instance, every few seconds)
//!   claims due holds with `FOR UPDATE SKIP LOCKED`, marks them expired and
//!   gives their stock and the buyers' limits back, in one transaction, so
//!   each expired hold returns its stock exactly once however many sweepers run.
//!
//! Whichever commits first wins; the other re-checks the status under the
//! lock and finds nothing to do.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use sqlx::PgPool;
use time::OffsetDateTime;
use tokio::task::JoinHandle;

use super::order::{Order, find_by_id};
use crate::{
    clock::Clock,
    domain::{ConfirmKey, ConfirmToken, OrderId, OrderStatus},
    error::AppError,
};

/// How long a hold lasts, and whom it counts against, by whether the
/// buyer's mailbox is proven: a mailbox is proven once a held order of its
/// buyer key was confirmed from its mail. An invented address never is, so
/// a script that holds stock under invented addresses holds it for
/// `unproven` at most, and only `per_address` tickets per network address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HoldRules {
    /// Unconfirmed tickets that one client address may hold per event for
    /// unproven mailboxes; beyond, 429 `unconfirmed_hold_limit`. 0: no limit
    /// (behind a proxy that shows one address for every client).
    pub per_address: i32,
    /// The first window: a hold for an unproven mailbox ends after this, or
    /// after the event's own hold if that is shorter. A proven mailbox gets
    /// the event's full hold and counts against no address.
    pub unproven: Duration,
}

impl Default for HoldRules {
    fn default() -> Self {
        Self {
            per_address: 10,
            unproven: Duration::from_secs(10 * 60),
        }
    }
}

impl HoldRules {
    /// The first window in whole seconds, as the sale's SQL takes it.
    pub(super) fn unproven_secs(&self) -> i32 {
        i32::try_from(self.unproven.as_secs()).unwrap_or(i32::MAX)
    }
}

/// What a sale holds orders with: the key their confirmation tokens are
/// derived from, and the rules for mailboxes not yet proven.
#[derive(Clone)]
pub struct Holding {
    pub key: ConfirmKey,
    pub rules: HoldRules,
}

/// Holds expired per sweeper transaction at most.
pub const EXPIRE_BATCH: i64 = 500;

/// What following a confirmation link did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirmed {
    /// This click confirmed the order.
    Now(Order),
    /// An earlier click did; nothing changed.
    Already(Order),
}

impl Confirmed {
    pub fn order(&self) -> &Order {
        match self {
            Self::Now(order) | Self::Already(order) => order,
        }
    }
}

/// Confirm a held order with the token from its mail, before its expiry
/// (at `now`). A second click finds it confirmed already; a click after the
/// expiry, or after a sweeper expired it, is [`AppError::HoldExpired`]; a
/// wrong token confirms nothing ([`AppError::Forbidden`]).
#[tracing::instrument(skip(db, token))]
pub async fn confirm(
    db: &PgPool,
    now: OffsetDateTime,
    order_id: OrderId,
    token: &ConfirmToken,
) -> Result<Confirmed, AppError> {
    let hash = token.hash();
    let mut tx = db.begin().await?;
    let confirmed =
        sqlx::query_file_scalar!("sql/sale/confirm_hold.sql", order_id.get(), &hash, now)
            .fetch_optional(&mut *tx)
            .await?;
    tx.commit().await?;
    if confirmed.is_none() {
        let refusal = sqlx::query_file!("sql/sale/confirm_refusal.sql", order_id.get(), &hash)
            .fetch_optional(db)
            .await?
            .ok_or(AppError::NotFound)?;
        if refusal.token_matches != Some(true) {
            return Err(AppError::Forbidden(
                "This confirmation link is not valid for this order.",
            ));
        }
        return match refusal.status {
            OrderStatus::Confirmed => {
                let order = find_by_id(db, order_id).await?.ok_or(AppError::NotFound)?;
                Ok(Confirmed::Already(order))
            }
            // Past its expiry, not swept yet: the sweeper returns its stock.
            OrderStatus::Held | OrderStatus::Expired => Err(AppError::HoldExpired),
            OrderStatus::Cancelled => Err(AppError::AlreadyCancelled),
        };
    }
    tracing::info!(%order_id, "held order confirmed");
    let order = find_by_id(db, order_id).await?.ok_or(AppError::NotFound)?;
    Ok(Confirmed::Now(order))
}

/// Expire up to [`EXPIRE_BATCH`] holds due at `now`, in one transaction:
/// mark them expired, put their tickets back on sale and free the buyers'
/// limits and the presale codes' uses. Returns how many expired. Locks are
/// taken in the order the sale and a cancel take them (the order rows, the
/// ticket type rows, the codes, then the holdings, each in key order); the
/// waiting list offers that follow take the next buyers' holdings, which
/// can meet a cancel or a batch crosswise: Postgres then aborts one, and a
/// sweep it aborted is simply run again by the next tick.
#[tracing::instrument(skip(db))]
pub async fn expire_holds(db: &PgPool, now: OffsetDateTime) -> Result<u64, AppError> {
    let mut tx = db.begin().await?;
    let expired = sqlx::query_file!("sql/sale/expire_holds.sql", now, EXPIRE_BATCH)
        .fetch_all(&mut *tx)
        .await?;
    if expired.is_empty() {
        tx.rollback().await?;
        return Ok(0);
    }
    let mut stock: BTreeMap<uuid::Uuid, i32> = BTreeMap::new();
    let mut codes: BTreeMap<uuid::Uuid, i32> = BTreeMap::new();
    let mut of_type: BTreeMap<(uuid::Uuid, &str), i32> = BTreeMap::new();
    let mut in_event: BTreeMap<(uuid::Uuid, &str), i32> = BTreeMap::new();
    for hold in &expired {
        *stock.entry(hold.ticket_type_id).or_default() += hold.quantity;
        if let Some(code_id) = hold.presale_code_id {
            *codes.entry(code_id).or_default() += hold.quantity;
        }
        *of_type
            .entry((hold.ticket_type_id, hold.buyer_key.as_str()))
            .or_default() += hold.quantity;
        *in_event
            .entry((hold.event_id, hold.buyer_key.as_str()))
            .or_default() += hold.quantity;
    }
    for (&ticket_type_id, &quantity) in &stock {
        sqlx::query_file!("sql/sale/cancel_restock.sql", ticket_type_id, quantity)
            .execute(&mut *tx)
            .await?;
    }
    for (code_id, quantity) in codes {
        sqlx::query_file!("sql/sale/release_code.sql", code_id, quantity)
            .execute(&mut *tx)
            .await?;
    }
    for ((ticket_type_id, buyer_key), quantity) in of_type {
        sqlx::query_file!(
            "sql/sale/cancel_release_type.sql",
            ticket_type_id,
            buyer_key,
            quantity,
        )
        .execute(&mut *tx)
        .await?;
    }
    for ((event_id, buyer_key), quantity) in in_event {
        sqlx::query_file!(
            "sql/sale/release_event_holding.sql",
            event_id,
            buyer_key,
            quantity,
        )
        .execute(&mut *tx)
        .await?;
    }
    // What came back goes to the waiting lists first, in this transaction:
    // an expired offer moves on to the next in line.
    for &ticket_type_id in stock.keys() {
        crate::db::waitlist::offer_returned_stock(&mut tx, ticket_type_id, now).await?;
    }
    tx.commit().await?;
    let count = expired.len() as u64;
    metrics::counter!("stampede_holds_expired_total").increment(count);
    tracing::info!(count, "holds expired; their tickets are back on sale");
    Ok(count)
}

/// Run [`expire_holds`] every `every` until aborted (every instance runs
/// one; they share the work through `SKIP LOCKED`).
pub fn spawn_sweeper(db: PgPool, clock: Arc<dyn Clock>, every: Duration) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            loop {
                match expire_holds(&db, clock.now()).await {
                    Ok(count) if count as i64 >= EXPIRE_BATCH => continue,
                    Ok(_) => break,
                    Err(err) => {
                        tracing::warn!(error = %err, "hold sweep failed; trying again later");
                        break;
                    }
                }
            }
        }
    })
}
