//! The pre-queue's verifiable order, drawn once at the opening, and the
//! ranks of those who arrive after it.

use sha2::{Digest, Sha256};
use sqlx::PgPool;

use super::{Room, load};
use crate::{domain::EventId, error::AppError};

/// The rule, in words, for pages and docs/architecture.md.
pub const RULE: &str = "Everyone who joins before the sale opens is in the pre-queue. At the opening \
the pre-queue is ordered by SHA-256(seed ‖ entry id) from lowest to highest (the seed's 32 bytes \
followed by the entry id's 16 bytes; ties, which do not happen in practice, by entry id); the \
seed's SHA-256 is shown before anyone joins and the seed after the opening. Everyone who joins \
after the opening queues behind the pre-queue in order of arrival.";

/// The pre-queue's order by [`RULE`]: what the shuffle computes in SQL.
pub fn shuffle_order(seed: &[u8], mut entries: Vec<uuid::Uuid>) -> Vec<uuid::Uuid> {
    entries.sort_by_cached_key(|id| {
        let mut hash = Sha256::new();
        hash.update(seed);
        hash.update(id.as_bytes());
        (hash.finalize().to_vec(), *id)
    });
    entries
}

/// Order the pre-queue by [`RULE`], once: the first caller does it, the
/// others find it done. Returns whether this call did it.
pub async fn shuffle(db: &PgPool, event_id: EventId) -> Result<bool, AppError> {
    let mut tx = db.begin().await?;
    let done = shuffle_in(&mut tx, event_id).await?;
    tx.commit().await?;
    Ok(done)
}

pub(super) async fn shuffle_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    event_id: EventId,
) -> Result<bool, AppError> {
    // The row lock serialises shufflers (a second one waits, then sees
    // `shuffled_at` set) and joiners (who hold it shared).
    let claimed = sqlx::query_scalar!(
        "UPDATE waiting_rooms SET shuffled_at = now() WHERE event_id = $1 AND shuffled_at IS NULL RETURNING event_id",
        event_id.get(),
    )
    .fetch_optional(&mut **tx)
    .await?;
    if claimed.is_none() {
        return Ok(false);
    }
    // The pre-queue's places are also its ranks (see `rank_arrivals`).
    let placed = sqlx::query!(
        r#"UPDATE queue_entries q SET position = r.place, rank = r.place
           FROM (SELECT q2.id, row_number() OVER (ORDER BY sha256(w.seed || uuid_send(q2.id)), q2.id) AS place
                 FROM queue_entries q2 JOIN waiting_rooms w ON w.event_id = q2.event_id
                 WHERE q2.event_id = $1) r
           WHERE q.id = r.id"#,
        event_id.get(),
    )
    .execute(&mut **tx)
    .await?
    .rows_affected();
    sqlx::query!(
        "UPDATE waiting_rooms SET ranked = $2 WHERE event_id = $1",
        event_id.get(),
        i64::try_from(placed).unwrap_or(i64::MAX),
    )
    .execute(&mut **tx)
    .await?;
    Ok(true)
}

/// Rank the arrivals since the last tick, in arrival order, behind every
/// entry ranked before (the admitter does it, holding the room's row).
/// Returns the room's `ranked` after.
pub(super) async fn rank_arrivals(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    event_id: EventId,
) -> Result<i64, AppError> {
    let ranked = sqlx::query_scalar!(
        "SELECT ranked FROM waiting_rooms WHERE event_id = $1",
        event_id.get(),
    )
    .fetch_one(&mut **tx)
    .await?;
    let added = sqlx::query!(
        r#"UPDATE queue_entries q SET rank = $2 + r.n
           FROM (SELECT id, row_number() OVER (ORDER BY seq) AS n FROM queue_entries
                 WHERE event_id = $1 AND rank IS NULL) r
           WHERE q.id = r.id"#,
        event_id.get(),
        ranked,
    )
    .execute(&mut **tx)
    .await?
    .rows_affected();
    let ranked = ranked + i64::try_from(added).unwrap_or(0);
    if added > 0 {
        sqlx::query!(
            "UPDATE waiting_rooms SET ranked = $2 WHERE event_id = $1",
            event_id.get(),
            ranked,
        )
        .execute(&mut **tx)
        .await?;
    }
    Ok(ranked)
}

/// The pre-queue's entry ids (sorted by id, which says nothing of the
/// order), with the seed: `None` before the shuffle.
pub async fn published_prequeue(
    db: &PgPool,
    event_id: EventId,
) -> Result<Option<(Room, Vec<uuid::Uuid>)>, AppError> {
    let Some(room) = load(db, event_id)
        .await?
        .filter(|r| r.shuffled_at.is_some())
    else {
        return Ok(None);
    };
    let ids = sqlx::query_scalar!(
        "SELECT id FROM queue_entries WHERE event_id = $1 AND position IS NOT NULL ORDER BY id",
        event_id.get(),
    )
    .fetch_all(db)
    .await?;
    Ok(Some((room, ids)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shuffle_rule_sorts_by_the_seeded_hash() {
        let seed = [7_u8; 32];
        let ids: Vec<uuid::Uuid> = (0..50).map(|_| uuid::Uuid::new_v4()).collect();
        let order = shuffle_order(&seed, ids.clone());
        let mut sorted = order.clone();
        sorted.sort();
        let mut expected = ids.clone();
        expected.sort();
        assert_eq!(sorted, expected);
        assert_eq!(shuffle_order(&seed, ids.into_iter().rev().collect()), order);
    }
}
