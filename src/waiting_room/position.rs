//! Where a buyer stands, and the room's figures for the organizer.

use sqlx::PgPool;
use time::OffsetDateTime;

use super::{Room, load};
use crate::{
    domain::{EventId, QueueEntryId},
    error::AppError,
};

/// Where a buyer stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// Still waiting: `ahead` entries before them, not yet admitted.
    Waiting {
        ahead: i64,
        prequeue: bool,
        shuffled: bool,
        /// Its rank, once the admitter has given it one.
        rank: Option<i64>,
    },
    /// Admitted: a pass until `expires_at` (if not spent).
    Admitted {
        expires_at: OffsetDateTime,
        spent: bool,
    },
}

pub async fn standing(
    db: &PgPool,
    event_id: EventId,
    entry: QueueEntryId,
) -> Result<Standing, AppError> {
    let row = sqlx::query!(
        r#"SELECT q.position, q.seq, q.rank, q.pass_expires_at,
                  EXISTS (SELECT 1 FROM orders o WHERE o.queue_entry_id = q.id) AS "spent!",
                  w.shuffled_at IS NOT NULL AS "shuffled!", w.ranked, w.admitted_upto
           FROM queue_entries q JOIN waiting_rooms w ON w.event_id = q.event_id
           WHERE q.id = $1 AND q.event_id = $2"#,
        entry.get(),
        event_id.get(),
    )
    .fetch_optional(db)
    .await?
    .ok_or(AppError::NotFound)?;
    if let Some(expires_at) = row.pass_expires_at {
        return Ok(Standing::Admitted {
            expires_at,
            spent: row.spent,
        });
    }
    // Before the shuffle nobody is ahead of anybody: everyone waits for it.
    // After, admission goes by rank and has let in ranks 1..admitted_upto:
    // a ranked entry's "ahead" is two numbers apart, with no count (at
    // ~20k waiting, counting them was the page's whole cost). An entry not
    // ranked yet (it arrived since the admitter's last tick) is behind
    // every ranked one and the unranked that arrived before it: a count
    // over one tick's arrivals at most.
    let ahead = match (row.shuffled, row.rank) {
        (false, _) => 0,
        (true, Some(rank)) => (rank - row.admitted_upto - 1).max(0),
        (true, None) => {
            let unranked_ahead = sqlx::query_scalar!(
                r#"SELECT count(*) AS "n!" FROM queue_entries
                   WHERE event_id = $1 AND rank IS NULL AND seq < $2"#,
                event_id.get(),
                row.seq,
            )
            .fetch_one(db)
            .await?;
            (row.ranked - row.admitted_upto) + unranked_ahead
        }
    };
    Ok(Standing::Waiting {
        ahead,
        prequeue: row.position.is_some() || !row.shuffled,
        shuffled: row.shuffled,
        rank: row.rank.filter(|_| row.shuffled),
    })
}

/// How far admission has gone in the event's room: ranks up to this one
/// are admitted (`None`: no room).
pub(super) async fn admitted_upto(db: &PgPool, event_id: EventId) -> Result<Option<i64>, AppError> {
    Ok(sqlx::query_scalar!(
        "SELECT admitted_upto FROM waiting_rooms WHERE event_id = $1",
        event_id.get()
    )
    .fetch_optional(db)
    .await?)
}

/// The figures of a room, for its organizer and the position page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoomFigures {
    pub waiting: i64,
    pub active_passes: i64,
    pub admitted: i64,
    /// Admitted in the minute before `now`.
    pub admitted_last_minute: i64,
}

pub async fn figures(
    db: &PgPool,
    event_id: EventId,
    now: OffsetDateTime,
) -> Result<RoomFigures, AppError> {
    let row = sqlx::query!(
        r#"SELECT count(*) FILTER (WHERE admitted_at IS NULL) AS "waiting!",
                  count(*) FILTER (WHERE admitted_at IS NOT NULL) AS "admitted!",
                  count(*) FILTER (WHERE admitted_at > $2::timestamptz - interval '1 minute'
                                     AND admitted_at <= $2::timestamptz) AS "last_minute!",
                  count(*) FILTER (WHERE pass_expires_at > $2 AND NOT EXISTS
                      (SELECT 1 FROM orders o WHERE o.queue_entry_id = q.id)) AS "active!"
           FROM queue_entries q WHERE q.event_id = $1"#,
        event_id.get(),
        now,
    )
    .fetch_one(db)
    .await?;
    Ok(RoomFigures {
        waiting: row.waiting,
        active_passes: row.active,
        admitted: row.admitted,
        admitted_last_minute: row.last_minute,
    })
}

/// A room as its organizer sees it: the settings and the live figures (the
/// dashboard page and the organizer API show the same).
#[derive(Debug, Clone)]
pub struct RoomStatus {
    pub room: Room,
    pub figures: RoomFigures,
}

impl RoomStatus {
    /// Seconds until everyone waiting now is admitted, at the set rate
    /// (`None` without a rate: the cap alone sets the pace).
    pub fn estimated_secs_to_clear(&self) -> Option<i64> {
        self.room
            .settings
            .admit_per_minute
            .map(|rate| self.figures.waiting * 60 / i64::from(rate))
    }
}

/// The room's status, or `None` if the event never had a room.
pub async fn status(
    db: &PgPool,
    event_id: EventId,
    now: OffsetDateTime,
) -> Result<Option<RoomStatus>, AppError> {
    let Some(room) = load(db, event_id).await? else {
        return Ok(None);
    };
    let figures = figures(db, event_id, now).await?;
    Ok(Some(RoomStatus { room, figures }))
}
