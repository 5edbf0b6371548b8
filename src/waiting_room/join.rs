//! Joining the queue: a new entry (after its proof of work, within the cap
//! per client address) or the entry the buyer already holds.

use std::net::IpAddr;

use sha2::{Digest, Sha256};
use sqlx::PgPool;
use time::OffsetDateTime;

use super::{Rooms, load, shuffle};
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
}

/// Join the event's queue, or keep the entry the buyer already holds
/// (`existing`: the entry token from their cookie or request). A new entry
/// needs a solved challenge (`proof`, see [`proof`](self::proof)), checked
/// before anything is written; keeping an entry writes nothing and needs
/// none.
pub async fn join(
    db: &PgPool,
    rooms: &Rooms,
    event_id: EventId,
    existing: Option<&str>,
    proof: Option<&str>,
    client: Option<IpAddr>,
    now: OffsetDateTime,
) -> Result<Joined, AppError> {
    let room = load(db, event_id)
        .await?
        .filter(|room| room.settings.enabled && room.published)
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
            });
        }
    }
    let salt = rooms.key.check_proof(event_id, proof, now)?;
    if now >= room.sale_opens_at && room.shuffled_at.is_none() {
        shuffle(db, event_id).await?;
    }
    let client_hash = rooms.client_hash(client);
    let mut tx = db.begin().await?;
    // The cap per address is exact: joins from one address (for one event)
    // take turns between their count and their insert. Transaction level,
    // so it goes with the commit (and works under PgBouncer).
    sqlx::query!(
        "SELECT pg_advisory_xact_lock($1)",
        client_lock(event_id, &client_hash),
    )
    .execute(&mut *tx)
    .await?;
    // Shared: joins run side by side, the shuffle (which updates the row)
    // waits for them and they for it, so every entry is either in the
    // shuffle or behind it.
    sqlx::query!(
        "SELECT event_id FROM waiting_rooms WHERE event_id = $1 FOR SHARE",
        event_id.get(),
    )
    .fetch_one(&mut *tx)
    .await?;
    // Counted up to the cap at most: a cost bounded by the cap, however
    // many entries one address holds (a NAT, or the cap raised).
    let held = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM (SELECT 1 FROM queue_entries
                                          WHERE event_id = $1 AND client_hash = $2 LIMIT $3) held"#,
        event_id.get(),
        &client_hash,
        i64::from(rooms.entries_per_client),
    )
    .fetch_one(&mut *tx)
    .await?;
    if held >= i64::from(rooms.entries_per_client) {
        return Err(AppError::TooManyEntries {
            max: rooms.entries_per_client,
        });
    }
    // A replayed solution hits `queue_entries_proof_once`: proof_reused,
    // and the transaction (nothing else in it) rolls back.
    let entry = sqlx::query_scalar!(
        "INSERT INTO queue_entries (event_id, joined_at, client_hash, proof_salt) VALUES ($1, $2, $3, $4) RETURNING id",
        event_id.get(),
        now,
        &client_hash,
        salt.as_bytes(),
    )
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    let entry = QueueEntryId::from(entry);
    Ok(Joined {
        entry,
        token: rooms.key.entry_token(event_id, entry),
        new: true,
    })
}

/// The advisory lock key of one (event, client address): 64 bits of a hash,
/// so two pairs share a key (and wait for each other) with odds 2^-64.
fn client_lock(event_id: EventId, client_hash: &[u8]) -> i64 {
    let mut hash = Sha256::new();
    hash.update(b"stampede queue cap");
    hash.update(event_id.get().as_bytes());
    hash.update(client_hash);
    let digest = hash.finalize();
    let mut first = [0_u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}
