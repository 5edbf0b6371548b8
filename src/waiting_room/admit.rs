//! Admission: the one admitter's tick (a token bucket at the room's rate,
//! within its cap of live passes, unless paused) and the passes it gives.

use std::time::Duration;

use sqlx::PgPool;
use time::OffsetDateTime;

use super::{
    Pass, Rooms, Standing,
    shuffle::{rank_arrivals, shuffle_in},
    standing,
};
use crate::{
    domain::{EventId, QueueEntryId},
    error::AppError,
};

/// Credit a stalled admitter may catch up at once, at most: after an
/// outage admission resumes at the rate, not with a flood.
const MAX_CATCH_UP: time::Duration = time::Duration::seconds(10);

/// The advisory lock the admitter holds for one tick (transaction level,
/// so PgBouncer in transaction mode keeps it working).
pub const ADMITTER_LOCK: i64 = 0x5374_616d_7065_6465; // "Stampede"

/// Pause or resume admission (the queue keeps its order); `NotFound` if
/// the event never had a room.
pub async fn set_paused(db: &PgPool, event_id: EventId, paused: bool) -> Result<(), AppError> {
    let mut tx = db.begin().await?;
    sqlx::query!(
        "UPDATE waiting_rooms SET paused = $2 WHERE event_id = $1 RETURNING event_id",
        event_id.get(),
        paused,
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(AppError::NotFound)?;
    tx.commit().await?;
    Ok(())
}

/// The pass of an admitted entry, if it is neither spent nor expired.
pub async fn pass_for(
    db: &PgPool,
    rooms: &Rooms,
    event_id: EventId,
    entry: QueueEntryId,
    now: OffsetDateTime,
) -> Result<Option<Pass>, AppError> {
    match standing(db, event_id, entry).await? {
        Standing::Admitted {
            expires_at,
            spent: false,
        } if expires_at > now => Ok(Some(rooms.key.pass(event_id, entry, expires_at))),
        _ => Ok(None),
    }
}

/// One admission tick across all rooms whose sale is open (not before,
/// not after it closed). `None`: another
/// admitter holds the lock (this instance stands by); otherwise how many
/// entries this tick admitted. Idempotent and safe with any number of
/// instances calling it at once.
pub async fn tick(db: &PgPool, now: OffsetDateTime) -> Result<Option<u64>, AppError> {
    let mut tx = db.begin().await?;
    let leader = sqlx::query_scalar!(
        r#"SELECT pg_try_advisory_xact_lock($1) AS "got!""#,
        ADMITTER_LOCK
    )
    .fetch_one(&mut *tx)
    .await?;
    if !leader {
        return Ok(None);
    }
    let rooms = sqlx::query!(
        r#"SELECT w.event_id, w.admit_per_minute, w.max_active, w.pass_minutes, w.admit_clock,
                  w.paused, w.admitted_upto,
                  w.shuffled_at IS NOT NULL AS "shuffled!", e.sale_opens_at
           FROM waiting_rooms w JOIN events e ON e.id = w.event_id
           WHERE w.enabled
             AND sale_open(e.status, e.sale_opens_at, e.sale_closes_at, e.starts_at, $1)
           ORDER BY w.event_id
           FOR UPDATE OF w"#,
        now,
    )
    .fetch_all(&mut *tx)
    .await?;
    let mut admitted_total = 0;
    for room in rooms {
        let event_id = EventId::from(room.event_id);
        if !room.shuffled {
            shuffle_in(&mut tx, event_id).await?;
        }
        // Paused rooms are ranked too: their arrivals' positions stay cheap.
        let ranked = rank_arrivals(&mut tx, event_id).await?;
        if room.paused {
            continue;
        }
        let active = sqlx::query_scalar!(
            r#"SELECT count(*) AS "n!" FROM queue_entries q
               WHERE q.event_id = $1 AND q.admitted_at IS NOT NULL AND q.pass_expires_at > $2
                 AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.queue_entry_id = q.id)"#,
            room.event_id,
            now,
        )
        .fetch_one(&mut *tx)
        .await?;
        let plan = Bucket {
            per_minute: room.admit_per_minute,
            max_active: room.max_active,
            clock: room.admit_clock,
            opened_at: room.sale_opens_at,
        }
        .plan(now, active);
        // By rank: the next `admit` ranks after those admitted, which
        // keeps the admitted exactly ranks 1..admitted_upto.
        let admit = plan.admit.min(ranked - room.admitted_upto).max(0);
        let admitted = if admit > 0 {
            let admitted = sqlx::query!(
                r#"UPDATE queue_entries SET admitted_at = $2::timestamptz,
                          pass_expires_at = $2::timestamptz + make_interval(mins => $3)
                   WHERE event_id = $1 AND rank > $4 AND rank <= $4 + $5"#,
                room.event_id,
                now,
                room.pass_minutes,
                room.admitted_upto,
                admit,
            )
            .execute(&mut *tx)
            .await?
            .rows_affected();
            sqlx::query!(
                "UPDATE waiting_rooms SET admitted_upto = admitted_upto + $2 WHERE event_id = $1",
                room.event_id,
                i64::try_from(admitted).unwrap_or(0),
            )
            .execute(&mut *tx)
            .await?;
            admitted
        } else {
            0
        };
        let clock = plan.clock_after(admitted, now);
        sqlx::query!(
            // Never backwards.
            "UPDATE waiting_rooms SET admit_clock = greatest(admit_clock, $2) WHERE event_id = $1",
            room.event_id,
            clock,
        )
        .execute(&mut *tx)
        .await?;
        admitted_total += admitted;
    }
    tx.commit().await?;
    Ok(Some(admitted_total))
}

/// How often each instance tries to admit.
pub const TICK: Duration = Duration::from_secs(1);

/// The admitter of this instance: a tick every [`TICK`]; whichever instance
/// takes the lock admits, the others stand by, so one that crashes is
/// replaced at the next tick of another.
pub fn spawn_admitter(db: PgPool) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(TICK);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            match tick(&db, OffsetDateTime::now_utc()).await {
                Ok(Some(admitted)) if admitted > 0 => {
                    metrics::counter!("stampede_waiting_room_admitted_total").increment(admitted);
                }
                Ok(_) => {}
                Err(err) => tracing::warn!(error = %err, "waiting room admission failed"),
            }
        }
    })
}

/// The token bucket of one room at one tick.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    per_minute: Option<i32>,
    max_active: Option<i32>,
    /// Credit accrues from here (`None`: from the opening).
    clock: Option<OffsetDateTime>,
    opened_at: OffsetDateTime,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Plan {
    admit: i64,
    /// The rate's credit this tick (`None`: no rate, the cap alone).
    credit: Option<i64>,
    /// Where the clock stood, after the catch-up limit.
    clock: OffsetDateTime,
    per_minute: Option<i32>,
}

impl Bucket {
    fn plan(self, now: OffsetDateTime, active: i64) -> Plan {
        // Another instance may have ticked with a later `now` (clocks
        // differ a little): then the clock is ahead and there is no credit.
        let clock = self.clock.unwrap_or(self.opened_at).max(now - MAX_CATCH_UP);
        let credit = self.per_minute.map(|rate| {
            let elapsed_ms = (now - clock).whole_milliseconds().max(0);
            i64::try_from(elapsed_ms * i128::from(rate) / 60_000).unwrap_or(0)
        });
        let room = self.max_active.map(|cap| (i64::from(cap) - active).max(0));
        let admit = match (credit, room) {
            (Some(credit), Some(room)) => credit.min(room),
            (Some(credit), None) => credit,
            (None, Some(room)) => room,
            (None, None) => 0,
        };
        Plan {
            admit,
            credit,
            clock,
            per_minute: self.per_minute,
        }
    }
}

impl Plan {
    /// The clock after admitting `admitted`: moved by exactly what was
    /// used, so fractions carry to the next tick; credit that found nobody
    /// to admit (or no room under the cap) is not banked.
    fn clock_after(self, admitted: u64, now: OffsetDateTime) -> OffsetDateTime {
        match (self.per_minute, self.credit) {
            (Some(rate), Some(credit)) if admitted as i64 >= credit && credit > 0 => {
                let used_ms = admitted as i64 * 60_000 / i64::from(rate);
                self.clock + time::Duration::milliseconds(used_ms)
            }
            (Some(_), Some(0)) => self.clock,
            _ => now.max(self.clock),
        }
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    #[test]
    fn the_bucket_admits_at_the_rate_and_carries_fractions() {
        let opened = datetime!(2030-01-01 12:00 UTC);
        let bucket = Bucket {
            per_minute: Some(90),
            max_active: None,
            clock: None,
            opened_at: opened,
        };
        // 1 s at 90/min: 1.5 credit, 1 admitted, half carried.
        let now = opened + time::Duration::seconds(1);
        let plan = bucket.plan(now, 0);
        assert_eq!(plan.admit, 1);
        let clock = plan.clock_after(1, now);
        let next = Bucket {
            clock: Some(clock),
            ..bucket
        }
        .plan(now + time::Duration::seconds(1), 0);
        assert_eq!(next.admit, 2);
        // An hour of outage catches up ten seconds, not an hour.
        let late = opened + time::Duration::hours(1);
        assert_eq!(bucket.plan(late, 0).admit, 15);
        // The cap bounds it; nobody waiting banks nothing.
        let capped = Bucket {
            max_active: Some(5),
            ..bucket
        };
        assert_eq!(capped.plan(late, 3).admit, 2);
        assert_eq!(capped.plan(late, 9).admit, 0);
        assert_eq!(bucket.plan(late, 0).clock_after(0, late), late);
        // A tick with an earlier `now` than the clock admits nothing and
        // leaves the clock where it is.
        let ahead = Bucket {
            clock: Some(late),
            ..bucket
        };
        let behind = ahead.plan(late - time::Duration::seconds(3), 0);
        assert_eq!(behind.admit, 0);
        assert_eq!(
            behind.clock_after(0, late - time::Duration::seconds(3)),
            late
        );
    }
}
