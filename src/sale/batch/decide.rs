//! Deciding a batch: each request in arrival order against the rules read
//! under the ticket type's row lock, and against the requests before it.
//! No I/O here; the writes then re-check what this decided.

use std::collections::{HashMap, HashSet};

use super::{
    job::Job,
    rows::{CodeRow, Held, Locked, order_key},
    unproven::Unproven,
};
use crate::{
    domain::{BuyerKey, BuyerLimits, SaleState, SaleWindow, code_is_current},
    error::AppError,
    sale::order::Order,
};

pub(super) enum Decision {
    /// Sold, with this presale code's uses if it came with one.
    Sell {
        code: Option<uuid::Uuid>,
    },
    Refuse(AppError),
    /// The key was used before this batch: that order's replay.
    Replay(Order),
    /// The same buyer and key as an earlier request of this batch.
    Twin,
}

/// What a batch's requests are decided against, read under the row lock.
pub(super) struct Rules<'a> {
    pub(super) locked: &'a Locked,
    pub(super) limits: BuyerLimits,
    pub(super) window: &'a SaleWindow,
    pub(super) existing: &'a HashMap<(String, String), Order>,
}

/// Each request in arrival order, against what is left after the ones
/// before it: the whole of the rules that the writes then re-check.
pub(super) fn decide(
    jobs: &[Job],
    buyers: &[BuyerKey],
    rules: &Rules<'_>,
    mut held: Held,
    mut codes: HashMap<String, CodeRow>,
    unproven: &mut Unproven,
) -> Vec<Decision> {
    let Rules {
        locked,
        limits,
        window,
        existing,
    } = *rules;
    let mut remaining = locked.remaining;
    let mut keys_seen = HashSet::new();
    let mut entries_seen = HashSet::new();
    jobs.iter()
        .zip(buyers)
        .enumerate()
        .map(|(index, (job, buyer))| {
            let request = &job.request;
            let key = order_key(request);
            if let Some(order) = existing.get(&key) {
                return Decision::Replay(order.clone());
            }
            if request
                .event_id
                .is_some_and(|id| id.get() != locked.event_id)
            {
                return Decision::Refuse(AppError::NotFound);
            }
            match window.state(job.now) {
                SaleState::Open => {}
                SaleState::Draft => return Decision::Refuse(AppError::NotFound),
                SaleState::Cancelled => {
                    return Decision::Refuse(AppError::SaleClosed("This event was cancelled."));
                }
                SaleState::NotOpenYet => {
                    return Decision::Refuse(AppError::SaleNotOpen {
                        opens_at: window.opens_at,
                    });
                }
                SaleState::Closed => {
                    return Decision::Refuse(AppError::SaleClosed(
                        "The sale for this event has closed.",
                    ));
                }
            }
            if locked.sales_halted {
                return Decision::Refuse(AppError::SaleClosed("This event was cancelled."));
            }
            if !keys_seen.insert(key) {
                return Decision::Twin;
            }
            // One pass, two purchases (different keys) in one batch: the
            // first spends it.
            if let Some(entry) = request.queue_entry
                && entries_seen.contains(&entry)
            {
                return Decision::Refuse(AppError::PassSpent);
            }
            // A presale code must unlock the type, now; a hidden type is
            // not there without one.
            let code = match &request.presale_code {
                None if locked.hidden => return Decision::Refuse(AppError::NotFound),
                None => None,
                Some(code) => match codes.get(code.as_str()) {
                    Some(row)
                        if row.unlocks
                            && code_is_current(row.valid_from, row.valid_until, job.now) =>
                    {
                        Some(code.as_str())
                    }
                    _ => return Decision::Refuse(AppError::code_not_valid()),
                },
            };
            let quantity = request.quantity.get();
            if quantity > locked.max_per_order {
                return Decision::Refuse(AppError::OrderLimit {
                    max: locked.max_per_order,
                });
            }
            let of_type = held.of_type.get(buyer.as_str()).copied().unwrap_or(0);
            let in_event = held.in_event.get(buyer.as_str()).copied().unwrap_or(0);
            if let Err(breach) = limits.check(of_type, in_event, quantity) {
                return Decision::Refuse(breach.into());
            }
            if remaining == 0 {
                return Decision::Refuse(AppError::SoldOut);
            }
            if remaining < quantity {
                return Decision::Refuse(AppError::NotEnoughLeft { remaining });
            }
            // A hold for an unproven mailbox, within its address's cap.
            if let Err(refusal) = unproven.fits(index, quantity) {
                return Decision::Refuse(refusal);
            }
            let code = match code.and_then(|code| codes.get_mut(code)) {
                // Used up answers as an unknown code does: a guesser learns
                // nothing from a spent code (one with uses left, it could
                // use, so its count tells nothing new).
                Some(row) if row.left == 0 => return Decision::Refuse(AppError::code_not_valid()),
                Some(row) if row.left < quantity => {
                    return Decision::Refuse(AppError::CodeUsedUp { left: row.left });
                }
                Some(row) => {
                    row.left -= quantity;
                    Some(row.id)
                }
                None => None,
            };
            remaining -= quantity;
            unproven.count(index, quantity);
            *held.of_type.entry(buyer.as_str().to_owned()).or_insert(0) += quantity;
            *held.in_event.entry(buyer.as_str().to_owned()).or_insert(0) += quantity;
            entries_seen.extend(request.queue_entry);
            Decision::Sell { code }
        })
        .collect()
}
