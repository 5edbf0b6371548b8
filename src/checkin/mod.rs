//! Check-in at the door: redeeming a ticket code once (this file), the
//! staff links that open the scanner page without an account
//! ([`links`]), and the organizer's reads for door devices ([`lists`]).
//!
//! A redeem is one transaction, its statements in `sql/checkin/`:
//!
//! 1. `claim_scan`: the scan's nonce is claimed (`INSERT ... ON CONFLICT DO
//!    NOTHING`). A retry of a scan already answered claims nothing and gets
//!    the stored answer (`replay_scan`); a twin in flight waits on the key
//!    until the first commits, then does the same.
//! 2. `redeem`: the one conditional `UPDATE` that lets a ticket in: its code,
//!    not yet redeemed, its order confirmed (that row share-locked, so a
//!    cancel either commits first and is seen, or waits for the redeem), its
//!    event the door's. Two doors scanning one code at once: the second
//!    `UPDATE` waits on the ticket's row, re-checks `redeemed_at IS NULL`
//!    against the committed version and updates nothing.
//! 3. `explain`: when nothing was updated, one read says why.
//! 4. `record_scan`: the answer is stored under the nonce, and all commits.

pub mod links;
pub mod lists;

use sqlx::PgPool;
use time::OffsetDateTime;

use crate::{
    domain::{CheckInResult, DoorName, EventId, OrderStatus, ScanNonce, TicketCode},
    error::AppError,
};

/// One scan at a door of an event.
#[derive(Debug, Clone)]
pub struct Scan {
    pub event_id: EventId,
    pub code: TicketCode,
    pub door: DoorName,
    pub nonce: ScanNonce,
}

/// The answer to a scan. `redeemed_at` and `door` say when and where the
/// ticket was let in (now for `ok`, earlier for `already_redeemed`);
/// `ticket_type` is the ticket's type where it belongs to this event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub result: CheckInResult,
    pub code: String,
    pub ticket_type: Option<String>,
    pub redeemed_at: Option<OffsetDateTime>,
    pub door: Option<String>,
    /// The nonce had been answered before: this is that answer again.
    pub replayed: bool,
}

/// Redeem a ticket code at `now` (see the module notes).
#[tracing::instrument(skip_all, fields(event_id = %scan.event_id, door = scan.door.as_str()))]
pub async fn redeem(db: &PgPool, now: OffsetDateTime, scan: &Scan) -> Result<Answer, AppError> {
    let event_id = scan.event_id.get();
    let code = scan.code.as_str();
    let nonce = scan.nonce.as_str();
    let mut tx = db.begin().await?;
    let claimed = sqlx::query_file_scalar!(
        "sql/checkin/claim_scan.sql",
        event_id,
        nonce,
        code,
        scan.door.as_str(),
        now,
    )
    .fetch_optional(&mut *tx)
    .await?;
    if claimed.is_none() {
        let stored = sqlx::query_file!("sql/checkin/replay_scan.sql", event_id, nonce)
            .fetch_one(&mut *tx)
            .await?;
        tx.rollback().await?;
        if stored.code != code {
            return Err(AppError::NonceReused);
        }
        let result = stored
            .result
            .as_deref()
            .and_then(CheckInResult::parse)
            .ok_or_else(|| {
                AppError::internal(anyhow::anyhow!("a committed scan without answer"))
            })?;
        return Ok(Answer {
            result,
            code: stored.code,
            ticket_type: stored.ticket_type,
            redeemed_at: stored.redeemed_at,
            door: stored.redeemed_door,
            replayed: true,
        });
    }

    let redeemed = sqlx::query_file!(
        "sql/checkin/redeem.sql",
        code,
        event_id,
        now,
        scan.door.as_str(),
    )
    .fetch_optional(&mut *tx)
    .await?;
    let answer = match redeemed {
        Some(row) => Answer {
            result: CheckInResult::Ok,
            code: code.to_owned(),
            ticket_type: Some(row.ticket_type),
            redeemed_at: Some(row.redeemed_at),
            door: Some(scan.door.as_str().to_owned()),
            replayed: false,
        },
        None => explain(&mut tx, scan).await?,
    };
    sqlx::query_file!(
        "sql/checkin/record_scan.sql",
        event_id,
        nonce,
        answer.result.as_str(),
        answer.ticket_type,
        answer.redeemed_at,
        answer.door,
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    tracing::info!(result = answer.result.as_str(), "scanned");
    Ok(answer)
}

/// Why the redeem updated nothing, read in its transaction (a fresh
/// snapshot under Read Committed: it sees the redemption it waited for).
async fn explain(tx: &mut sqlx::PgConnection, scan: &Scan) -> Result<Answer, AppError> {
    let code = scan.code.as_str();
    let row = sqlx::query_file!("sql/checkin/explain.sql", code, scan.event_id.get())
        .fetch_optional(&mut *tx)
        .await?;
    let refused = |result, row: Option<(String, Option<OffsetDateTime>, Option<String>)>| {
        let (ticket_type, redeemed_at, door) = match row {
            Some((t, at, door)) => (Some(t), at, door),
            None => (None, None, None),
        };
        Answer {
            result,
            code: code.to_owned(),
            ticket_type,
            redeemed_at,
            door,
            replayed: false,
        }
    };
    let Some(row) = row else {
        return Ok(refused(CheckInResult::Unknown, None));
    };
    // Nothing about another event's ticket is shown, not even its type.
    if !row.right_event {
        return Ok(refused(CheckInResult::WrongEvent, None));
    }
    if row.redeemed_at.is_some() {
        let seen = (row.ticket_type, row.redeemed_at, row.redeemed_door);
        return Ok(refused(CheckInResult::AlreadyRedeemed, Some(seen)));
    }
    if row.order_status == OrderStatus::Cancelled.as_str() {
        return Ok(refused(
            CheckInResult::OrderCancelled,
            Some((row.ticket_type, None, None)),
        ));
    }
    // A live, unredeemed ticket of this event that the UPDATE did not take:
    // only possible if the rows changed between the two statements.
    Err(AppError::internal(anyhow::anyhow!(
        "redeem updated nothing for a live ticket"
    )))
}
