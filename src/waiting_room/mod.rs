//! The waiting room (issue 12): per event, off by default.
//!
//! - **Joining.** From the pre-queue's opening (`prequeue_minutes` before the
//!   sale) a buyer joins with a POST and gets an entry ([`join`]); its id,
//!   signed ([`RoomKey::entry_token`]), is their cookie.
//! - **The shuffle.** At the sale's opening the pre-queue is ordered by
//!   SHA-256(seed ‖ entry id) ascending, ties by entry id ([`shuffle`]), in
//!   one transaction by whoever gets there first. The seed's SHA-256 is
//!   public from the start; the seed and the pre-queue's ids are published
//!   after, so anyone can recompute the order. Later arrivals queue behind
//!   the pre-queue in arrival order.
//! - **Admission.** One admitter at a time across instances ([`tick`], under
//!   a transaction-level advisory lock: a crashed admitter's lock goes with
//!   its connection), token-bucket style at the room's rate, within its cap
//!   of active passes, unless paused.
//! - **The pass.** An admitted entry's signed pass ([`RoomKey::pass`]) buys
//!   once: the sale checks it before anything is written and records the
//!   entry on the order, whose unique index is the last word.

mod admit;
mod join;
mod join_batch;
mod pass;
mod position;
mod proof;
mod refresh_ahead;
mod shuffle;

use std::{net::IpAddr, sync::Arc, time::Duration};

use refresh_ahead::RefreshAhead;
use sqlx::PgPool;
use time::OffsetDateTime;

pub use admit::{ADMITTER_LOCK, TICK, pass_for, set_paused, spawn_admitter, tick};
pub use join::{Joined, join};
pub use pass::{EntryToken, MIN_KEY_BYTES, Pass, Ranked, RoomKey};
pub use position::{RoomFigures, RoomStatus, Standing, figures, standing, status};
pub use proof::{
    CHALLENGE_TTL, Challenge, DEFAULT_PROOF_BITS, MAX_PROOF_BITS, ProofSalt, leading_zero_bits,
    solve,
};
pub use shuffle::{RULE, published_prequeue, shuffle, shuffle_order};

use crate::{
    domain::{EventId, TicketTypeId},
    error::AppError,
};

/// Entries per client address and event, unless configured.
pub const DEFAULT_ENTRIES_PER_CLIENT: u32 = 10;

/// How stale the sale's view of "does this event have a room" may be: a
/// room switched on is enforced by every instance within this.
pub const FRESH_FOR: Duration = Duration::from_secs(1);

/// What the organizer sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomSettings {
    pub enabled: bool,
    pub prequeue_minutes: i32,
    pub admit_per_minute: Option<i32>,
    pub max_active: Option<i32>,
    pub pass_minutes: i32,
    pub paused: bool,
}

impl Default for RoomSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            prequeue_minutes: 15,
            admit_per_minute: Some(60),
            max_active: None,
            pass_minutes: 10,
            paused: false,
        }
    }
}

/// An event's room as stored, with the event's sale opening.
#[derive(Debug, Clone)]
pub struct Room {
    pub event_id: EventId,
    pub settings: RoomSettings,
    pub seed: Vec<u8>,
    pub commitment: Vec<u8>,
    pub shuffled_at: Option<OffsetDateTime>,
    pub sale_opens_at: OffsetDateTime,
    /// The event is published (not a draft, not cancelled): only then can
    /// anyone join.
    pub published: bool,
}

impl Room {
    pub fn prequeue_opens_at(&self) -> OffsetDateTime {
        self.sale_opens_at - time::Duration::minutes(i64::from(self.settings.prequeue_minutes))
    }

    /// The SHA-256 of the seed, in hex: public from the start.
    pub fn commitment_hex(&self) -> String {
        hex::encode(&self.commitment)
    }

    /// The seed in hex, once the pre-queue is ordered; never before.
    pub fn revealed_seed_hex(&self) -> Option<String> {
        self.shuffled_at.map(|_| hex::encode(&self.seed))
    }
}

/// The room of an event, or `None` if it never had one.
pub async fn load(db: &PgPool, event_id: EventId) -> Result<Option<Room>, AppError> {
    let row = sqlx::query!(
        r#"SELECT w.enabled, w.prequeue_minutes, w.admit_per_minute, w.max_active, w.pass_minutes,
                  w.paused, w.seed, w.seed_sha256, w.shuffled_at, e.sale_opens_at,
                  e.status = 'published' AS "published!"
           FROM waiting_rooms w JOIN events e ON e.id = w.event_id
           WHERE w.event_id = $1"#,
        event_id.get(),
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|row| Room {
        event_id,
        settings: RoomSettings {
            enabled: row.enabled,
            prequeue_minutes: row.prequeue_minutes,
            admit_per_minute: row.admit_per_minute,
            max_active: row.max_active,
            pass_minutes: row.pass_minutes,
            paused: row.paused,
        },
        seed: row.seed,
        commitment: row.seed_sha256,
        shuffled_at: row.shuffled_at,
        sale_opens_at: row.sale_opens_at,
        published: row.published,
    }))
}

/// Save the organizer's settings (ownership is the caller's check). The
/// seed is drawn with the first save and never changes after.
pub async fn save(db: &PgPool, event_id: EventId, settings: &RoomSettings) -> Result<(), AppError> {
    use rand::RngCore as _;
    let mut seed = [0_u8; 32];
    rand::rng().fill_bytes(&mut seed);
    let mut tx = db.begin().await?;
    sqlx::query!(
        r#"INSERT INTO waiting_rooms (event_id, enabled, prequeue_minutes, admit_per_minute,
                                      max_active, pass_minutes, paused, seed)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
           ON CONFLICT (event_id) DO UPDATE
           SET enabled = EXCLUDED.enabled, prequeue_minutes = EXCLUDED.prequeue_minutes,
               admit_per_minute = EXCLUDED.admit_per_minute, max_active = EXCLUDED.max_active,
               pass_minutes = EXCLUDED.pass_minutes, paused = EXCLUDED.paused"#,
        event_id.get(),
        settings.enabled,
        settings.prequeue_minutes,
        settings.admit_per_minute,
        settings.max_active,
        settings.pass_minutes,
        settings.paused,
        &seed[..],
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// What the process knows of rooms: the key, the cap per client, and a
/// short cache of which ticket types' events have a room switched on.
#[derive(Clone)]
pub struct Rooms {
    key: RoomKey,
    entries_per_client: u32,
    /// The proof of work's difficulty (leading zero bits).
    proof_bits: u32,
    by_ticket_type: RefreshAhead<TicketTypeId, Option<EventId>>,
    by_event: RefreshAhead<EventId, Option<Arc<Room>>>,
    /// Each room's admitted-up-to mark, read at most once per `FRESH_FOR`
    /// per event by this instance, however many buyers poll.
    marks: RefreshAhead<EventId, Option<i64>>,
    /// New entries wait here for their event's next batch.
    joins: join_batch::JoinBatcher,
}

impl std::fmt::Debug for Rooms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rooms")
            .field("entries_per_client", &self.entries_per_client)
            .field("proof_bits", &self.proof_bits)
            .finish_non_exhaustive()
    }
}

impl Rooms {
    pub fn new(key: RoomKey, entries_per_client: u32) -> Self {
        Self {
            key,
            entries_per_client,
            proof_bits: DEFAULT_PROOF_BITS,
            by_ticket_type: RefreshAhead::new(100_000, FRESH_FOR),
            by_event: RefreshAhead::new(10_000, FRESH_FOR),
            marks: RefreshAhead::new(10_000, FRESH_FOR),
            joins: join_batch::JoinBatcher::default(),
        }
    }

    /// The proof of work's difficulty: leading zero bits of SHA-256, 2^bits
    /// hashes on average (at most [`MAX_PROOF_BITS`]).
    pub fn with_proof_bits(mut self, bits: u32) -> Self {
        self.proof_bits = bits.min(MAX_PROOF_BITS);
        self
    }

    pub fn key(&self) -> &RoomKey {
        &self.key
    }

    /// A fresh challenge for joining the event's queue (no I/O).
    pub fn challenge(&self, event_id: EventId, now: OffsetDateTime) -> Challenge {
        self.key.challenge(event_id, self.proof_bits, now)
    }

    /// The event whose room the ticket type is behind, if its room is on:
    /// one in-memory lookup on the sale path, one query a second per type.
    pub async fn event_behind_room(
        &self,
        db: &PgPool,
        ticket_type_id: TicketTypeId,
    ) -> Result<Option<EventId>, AppError> {
        let db = db.clone();
        self.by_ticket_type
            .get(ticket_type_id, || async move {
                let event = sqlx::query_scalar!(
                    r#"SELECT t.event_id FROM ticket_types t
                       JOIN waiting_rooms w ON w.event_id = t.event_id AND w.enabled
                       WHERE t.id = $1"#,
                    ticket_type_id.get(),
                )
                .fetch_optional(&db)
                .await?;
                Ok(event.map(EventId::from))
            })
            .await
            .map_err(shared_error)
    }

    /// The event's room if it is switched on (shared by every visitor, so
    /// cached like the event page).
    pub async fn active(
        &self,
        db: &PgPool,
        event_id: EventId,
        now: OffsetDateTime,
    ) -> Result<Option<Arc<Room>>, AppError> {
        // Past the opening but not yet seen shuffled: read again, so that
        // the seed shows as soon as it is drawn (a read per view until
        // then, which the admitter's next tick ends).
        if let Some(Some(room)) = self.by_event.peek(&event_id).await
            && room.shuffled_at.is_none()
            && now >= room.sale_opens_at
        {
            self.by_event.invalidate(&event_id).await;
        }
        let db = db.clone();
        self.by_event
            .get(event_id, || async move {
                Ok(load(&db, event_id)
                    .await?
                    .filter(|room| room.settings.enabled)
                    .map(Arc::new))
            })
            .await
            .map_err(shared_error)
    }

    /// Ranks up to this one are admitted in the event's room, as this
    /// instance last read it: the read after `FRESH_FOR` starts in the
    /// background, so a poll may see the mark of the read before (an
    /// admitted buyer learns it at their next poll at worst).
    pub async fn admitted_upto(
        &self,
        db: &PgPool,
        event_id: EventId,
    ) -> Result<Option<i64>, AppError> {
        let db = db.clone();
        self.marks
            .get(event_id, || async move {
                position::admitted_upto(&db, event_id).await
            })
            .await
            .map_err(shared_error)
    }

    /// Drop what this instance remembers of the event's room (its
    /// organizer changed it here).
    pub async fn forget(&self, event_id: EventId) {
        self.by_event.invalidate(&event_id).await;
        // Which ticket types are the event's is not kept for events without
        // a room (their entry is `None`): forget them all. Organizers'
        // changes are rare; each type costs one read in the next second.
        self.by_ticket_type.invalidate_all();
    }

    /// A keyed hash of the client's address (IPv4, or IPv6 /64).
    fn client_hash(&self, client: Option<IpAddr>) -> Vec<u8> {
        let prefix = client.map(|ip| match ip.to_canonical() {
            IpAddr::V4(v4) => v4.octets().to_vec(),
            IpAddr::V6(v6) => v6.octets()[..8].to_vec(),
        });
        self.key.keyed_hash(&prefix.unwrap_or_default())
    }
}

fn shared_error(err: Arc<AppError>) -> AppError {
    match *err {
        AppError::Overloaded => AppError::Overloaded,
        AppError::NotFound => AppError::NotFound,
        _ => AppError::internal(anyhow::anyhow!("waiting room: {err}")),
    }
}
