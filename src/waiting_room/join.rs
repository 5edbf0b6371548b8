//! Joining the queue: a new entry (after its proof of work, within the cap
//! per client address) or the entry the buyer already holds.

use std::net::IpAddr;

use sqlx::PgPool;
use time::OffsetDateTime;

use super::{
    Rooms,
    join_batch::{NewEntry, Outcome},
    shuffle,
};
use crate::{
    domain::{EventId, QueueEntryId},
    error::AppError,
};

/// A buyer's entry after joining.
#[derive(Debug, Clone)]
pub struct Joined {
    pub entry: QueueEntryId,
    /// Signed: what the buyer keeps (cookie, or the API answer).
    pub token: String,
    /// False when the buyer's existing entry was kept.
    pub new: bool,
    /// A new entry written before the shuffle: it waits for it, in the
    /// pre-queue (as read under the room's row lock).
    pub unshuffled: bool,
}

/// Join the event's queue, or keep the entry the buyer already holds
/// (`existing`: the entry token from their cookie or request). A new entry
/// needs a solved challenge (`proof`, see [`proof`](self::proof)), checked
/// before anything is written, and is written with the joins of the event
/// that arrive with it (`join_batch`); keeping an entry writes nothing and
/// needs none.
pub async fn join(
    db: &PgPool,
    rooms: &Rooms,
    event_id: EventId,
    existing: Option<&str>,
    proof: Option<&str>,
    client: Option<IpAddr>,
    now: OffsetDateTime,
) -> Result<Joined, AppError> {
    // As this instance last read it: a join costs no read of the room. The
    // batch reads it again under its row lock, so a room switched off or an
    // event unpublished since takes no entry.
    let room = rooms
        .active(db, event_id, now)
        .await?
        .filter(|room| room.published)
        .ok_or(AppError::NotFound)?;
    if now < room.prequeue_opens_at() {
        return Err(AppError::Forbidden(
            "The queue for this event is not open yet; come back when it opens.",
        ));
    }
    if let Some(entry) = existing.and_then(|token| rooms.key.verify_entry_token(event_id, token)) {
        // Kept while it waits or holds a live, unspent pass.
        let live = sqlx::query_scalar!(
            r#"SELECT (q.pass_expires_at IS NULL OR q.pass_expires_at > $3)
                      AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.queue_entry_id = q.id)
                      AS "live!"
               FROM queue_entries q WHERE q.id = $1 AND q.event_id = $2"#,
            entry.get(),
            event_id.get(),
            now,
        )
        .fetch_optional(db)
        .await?;
        if live == Some(true) {
            return Ok(Joined {
                entry,
                token: rooms.key.entry_token(event_id, entry),
                new: false,
                unshuffled: false,
            });
        }
    }
    let salt = rooms.key.check_proof(event_id, proof, now)?;
    if now >= room.sale_opens_at && room.shuffled_at.is_none() {
        shuffle(db, event_id).await?;
    }
    let new_entry = NewEntry {
        client_hash: rooms.client_hash(client),
        proof_salt: salt.as_bytes().to_vec(),
        joined_at: now,
    };
    let (entry, shuffled) = match rooms
        .joins
        .join(db, event_id, rooms.entries_per_client, new_entry)
        .await?
    {
        Outcome::Joined { entry, shuffled } => (entry, shuffled),
        Outcome::TooMany => {
            return Err(AppError::TooManyEntries {
                max: rooms.entries_per_client,
            });
        }
        Outcome::ProofReused => return Err(AppError::ProofReused),
    };
    Ok(Joined {
        entry,
        token: rooms.key.entry_token(event_id, entry),
        new: true,
        unshuffled: !shuffled,
    })
}
