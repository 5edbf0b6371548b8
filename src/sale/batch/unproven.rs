//! A batch's holds for mailboxes not yet proven ([`HoldRules`]): which of
//! its buyers are unproven, how long their holds last, and what their client
//! addresses hold already in the event, counted under the addresses'
//! advisory locks (after the ticket type's row lock, in key order, as
//! [`crate::sale::single`] takes them) and held to the commit.

use std::collections::{HashMap, HashSet};

use sqlx::{Postgres, Transaction};

use super::job::Job;
use crate::{domain::BuyerKey, error::AppError, sale::HoldRules};

/// Per job of a batch of a holding event: its hold and whom it counts against.
#[derive(Debug, Default)]
pub(super) struct Unproven {
    /// Per job: the hold's seconds if shorter than the event's (an
    /// unproven mailbox), and the client address it counts against.
    pub(super) jobs: Vec<JobHold>,
    /// Unconfirmed tickets each address holds in the event already.
    pub(super) held: HashMap<String, i32>,
    /// The cap per address (`HoldRules::per_address`).
    pub(super) cap: i32,
}

#[derive(Debug, Clone, Default)]
pub(super) struct JobHold {
    pub(super) secs: Option<i32>,
    pub(super) address: Option<String>,
}

/// For an event that holds its orders for `hold_secs`: read the batch's
/// proven buyers, and lock and count the unproven ones' addresses.
pub(super) async fn read(
    tx: &mut Transaction<'_, Postgres>,
    rules: HoldRules,
    event_id: uuid::Uuid,
    hold_secs: i32,
    jobs: &[Job],
    buyers: &[BuyerKey],
) -> Result<Unproven, AppError> {
    // Proven: a held order of the buyer's was confirmed from its mail.
    let keys: Vec<&str> = buyers.iter().map(BuyerKey::as_str).collect();
    let proven: HashSet<String> =
        sqlx::query_file_scalar!("sql/sale/proven_buyers.sql", &keys as &[&str])
            .fetch_all(&mut **tx)
            .await?
            .into_iter()
            .collect();
    let first_window = rules.unproven_secs().min(hold_secs);
    let jobs: Vec<JobHold> = jobs
        .iter()
        .zip(buyers)
        .map(|(job, buyer)| {
            if proven.contains(buyer.as_str()) {
                return JobHold::default();
            }
            JobHold {
                secs: Some(first_window),
                address: job
                    .request
                    .client
                    .filter(|_| rules.per_address > 0)
                    .map(|client| client.to_string()),
            }
        })
        .collect();
    let addresses: Vec<&str> = jobs.iter().filter_map(|j| j.address.as_deref()).collect();
    let mut held = HashMap::new();
    if !addresses.is_empty() {
        // In key order, after the row lock, to the commit: no cycle with
        // another batch or a single purchase.
        sqlx::query_file!("sql/sale/lock_address.sql", event_id, &addresses as &[&str])
            .fetch_one(&mut **tx)
            .await?;
        // A statement of its own, after the locks: it sees what the last
        // holder of each committed.
        let rows = sqlx::query_file!(
            "sql/sale/address_holds.sql",
            event_id,
            &addresses as &[&str]
        )
        .fetch_all(&mut **tx)
        .await?;
        held.extend(rows.into_iter().map(|row| (row.address, row.quantity)));
    }
    Ok(Unproven {
        jobs,
        held,
        cap: rules.per_address,
    })
}

impl Unproven {
    fn address(&self, index: usize) -> Option<&String> {
        self.jobs.get(index).and_then(|j| j.address.as_ref())
    }

    /// Whether job `index` may hold `quantity` more tickets.
    pub(super) fn fits(&self, index: usize, quantity: i32) -> Result<(), AppError> {
        match self.address(index) {
            Some(address) if self.held.get(address).copied().unwrap_or(0) + quantity > self.cap => {
                Err(AppError::UnconfirmedHoldLimit { max: self.cap })
            }
            _ => Ok(()),
        }
    }

    /// Job `index` holds `quantity` tickets: they count for the jobs after it.
    pub(super) fn count(&mut self, index: usize, quantity: i32) {
        if let Some(address) = self.address(index).cloned() {
            *self.held.entry(address).or_insert(0) += quantity;
        }
    }
}
