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

mod pass;
mod proof;

use std::{net::IpAddr, sync::Arc, time::Duration};

use moka::future::Cache;
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use time::OffsetDateTime;

pub use pass::{MIN_KEY_BYTES, Pass, RoomKey};
pub use proof::{
    CHALLENGE_TTL, Challenge, DEFAULT_PROOF_BITS, MAX_PROOF_BITS, ProofSalt, leading_zero_bits,
    solve,
};

use crate::{
    domain::{EventId, QueueEntryId, TicketTypeId},
    error::AppError,
};

/// Entries per client address and event, unless configured.
pub const DEFAULT_ENTRIES_PER_CLIENT: u32 = 10;

/// How stale the sale's view of "does this event have a room" may be: a
/// room switched on is enforced by every instance within this.
pub const FRESH_FOR: Duration = Duration::from_secs(1);

/// Credit a stalled admitter may catch up at once, at most: after an
/// outage admission resumes at the rate, not with a flood.
const MAX_CATCH_UP: time::Duration = time::Duration::seconds(10);

/// The advisory lock the admitter holds for one tick (transaction level,
/// so PgBouncer in transaction mode keeps it working).
pub const ADMITTER_LOCK: i64 = 0x5374_616d_7065_6465; // "Stampede"

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

/// The rule, in words, for pages and README.
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
    .execute(db)
    .await?;
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
    by_ticket_type: Cache<TicketTypeId, Option<EventId>>,
    by_event: Cache<EventId, Option<Arc<Room>>>,
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
            by_ticket_type: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(FRESH_FOR)
                .build(),
            by_event: Cache::builder()
                .max_capacity(10_000)
                .time_to_live(FRESH_FOR)
                .build(),
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
        self.by_ticket_type
            .try_get_with(ticket_type_id, async {
                let event = sqlx::query_scalar!(
                    r#"SELECT t.event_id FROM ticket_types t
                       JOIN waiting_rooms w ON w.event_id = t.event_id AND w.enabled
                       WHERE t.id = $1"#,
                    ticket_type_id.get(),
                )
                .fetch_optional(db)
                .await?;
                Ok::<_, AppError>(event.map(EventId::from))
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
        if let Some(Some(room)) = self.by_event.get(&event_id).await
            && room.shuffled_at.is_none()
            && now >= room.sale_opens_at
        {
            self.by_event.invalidate(&event_id).await;
        }
        self.by_event
            .try_get_with(event_id, async {
                Ok::<_, AppError>(
                    load(db, event_id)
                        .await?
                        .filter(|room| room.settings.enabled)
                        .map(Arc::new),
                )
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
        _ => AppError::internal(anyhow::anyhow!("waiting room: {err}")),
    }
}

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

/// Order the pre-queue by [`RULE`], once: the first caller does it, the
/// others find it done. Returns whether this call did it.
pub async fn shuffle(db: &PgPool, event_id: EventId) -> Result<bool, AppError> {
    let mut tx = db.begin().await?;
    let done = shuffle_in(&mut tx, event_id).await?;
    tx.commit().await?;
    Ok(done)
}

async fn shuffle_in(
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
async fn rank_arrivals(
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

/// Where a buyer stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// Still waiting: `ahead` entries before them, not yet admitted.
    Waiting {
        ahead: i64,
        prequeue: bool,
        shuffled: bool,
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
    })
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

/// Pause or resume admission (the queue keeps its order); `NotFound` if
/// the event never had a room.
pub async fn set_paused(db: &PgPool, event_id: EventId, paused: bool) -> Result<(), AppError> {
    sqlx::query!(
        "UPDATE waiting_rooms SET paused = $2 WHERE event_id = $1 RETURNING event_id",
        event_id.get(),
        paused,
    )
    .fetch_optional(db)
    .await?
    .ok_or(AppError::NotFound)?;
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
