//! Staff links: the organizer creates one per door, scoped to an event and
//! a time window; whoever holds it opens the scanner page, no account
//! needed. The secret is shown once; the table keeps its SHA-256, and a
//! link is found by looking that hash up. Unknown, revoked, not yet valid
//! and expired links are all "not found".

use sqlx::PgPool;
use time::OffsetDateTime;

use crate::{
    domain::{
        DoorLinkId, DoorName, DoorSecret, DoorWindow, EventId, ForField, InvalidField, OrganizerId,
        Zone,
    },
    error::AppError,
};

/// A link as the organizer's dashboard lists it (never its secret).
#[derive(Debug, Clone)]
pub struct DoorLink {
    pub id: DoorLinkId,
    pub door: String,
    pub valid_from: OffsetDateTime,
    pub valid_until: OffsetDateTime,
    pub created_at: OffsetDateTime,
    pub revoked_at: Option<OffsetDateTime>,
}

/// Whether a link opens the scanner at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    NotYet,
    Active,
    Expired,
    Revoked,
}

impl LinkState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotYet => "not yet valid",
            Self::Active => "active",
            Self::Expired => "expired",
            Self::Revoked => "revoked",
        }
    }
}

impl DoorLink {
    pub fn state(&self, now: OffsetDateTime) -> LinkState {
        if self.revoked_at.is_some() {
            LinkState::Revoked
        } else if now < self.valid_from {
            LinkState::NotYet
        } else if now < self.valid_until {
            LinkState::Active
        } else {
            LinkState::Expired
        }
    }
}

/// A link to create: the door's name and when it works.
#[derive(Debug, Clone)]
pub struct NewDoorLink {
    pub door: DoorName,
    pub window: DoorWindow,
}

impl NewDoorLink {
    /// From the dashboard's form (times as RFC 3339 or `datetime-local`,
    /// read in the event's zone).
    pub fn parse(
        zone: &Zone,
        door: &str,
        valid_from: &str,
        valid_until: &str,
    ) -> Result<Self, InvalidField> {
        let door = DoorName::parse(door).for_field("door")?;
        let from = zone.parse_datetime(valid_from).for_field("valid_from")?;
        let until = zone.parse_datetime(valid_until).for_field("valid_until")?;
        Ok(Self {
            door,
            window: DoorWindow::new(from, until)?,
        })
    }
}

/// The scanner a live link opens.
#[derive(Debug, Clone)]
pub struct OpenDoor {
    pub event_id: EventId,
    pub door: DoorName,
    pub event_title: String,
    pub venue: String,
    pub starts_at: OffsetDateTime,
    pub zone: Zone,
}

/// Create a link for an event of this organizer's and return its secret,
/// the only time it exists outside the organizer's hands. Another
/// organizer's event is "not found".
pub async fn create(
    db: &PgPool,
    organizer_id: OrganizerId,
    event_id: EventId,
    new: &NewDoorLink,
) -> Result<DoorSecret, AppError> {
    let secret = DoorSecret::generate();
    let mut tx = db.begin().await?;
    let created = sqlx::query!(
        "INSERT INTO door_links (event_id, door, secret_hash, valid_from, valid_until)
         SELECT id, $3, $4, $5, $6 FROM events WHERE id = $1 AND organizer_id = $2",
        event_id.get(),
        organizer_id.get(),
        new.door.as_str(),
        &secret.hash(),
        new.window.from,
        new.window.until,
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    if created.rows_affected() == 1 {
        Ok(secret)
    } else {
        Err(AppError::NotFound)
    }
}

/// Revoke a live link of an event of this organizer's; anything else
/// (another organizer's, already revoked, another event's) is "not found".
pub async fn revoke(
    db: &PgPool,
    organizer_id: OrganizerId,
    event_id: EventId,
    link_id: DoorLinkId,
) -> Result<(), AppError> {
    let mut tx = db.begin().await?;
    let revoked = sqlx::query!(
        "UPDATE door_links l SET revoked_at = now()
         FROM events e
         WHERE l.id = $1 AND l.event_id = $2 AND l.revoked_at IS NULL
           AND e.id = l.event_id AND e.organizer_id = $3",
        link_id.get(),
        event_id.get(),
        organizer_id.get(),
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    if revoked.rows_affected() == 1 {
        Ok(())
    } else {
        Err(AppError::NotFound)
    }
}

/// An event's links, newest first (an event of this organizer's only).
pub async fn list(
    db: &PgPool,
    organizer_id: OrganizerId,
    event_id: EventId,
) -> Result<Vec<DoorLink>, AppError> {
    Ok(sqlx::query_as!(
        DoorLink,
        "SELECT l.id, l.door, l.valid_from, l.valid_until, l.created_at, l.revoked_at
         FROM door_links l JOIN events e ON e.id = l.event_id
         WHERE l.event_id = $1 AND e.organizer_id = $2
         ORDER BY l.created_at DESC, l.id LIMIT 200",
        event_id.get(),
        organizer_id.get(),
    )
    .fetch_all(db)
    .await?)
}

/// The scanner a secret opens at `now`: not found unless the link exists,
/// is not revoked and `now` is inside its window.
pub async fn open(
    db: &PgPool,
    secret: Option<&DoorSecret>,
    now: OffsetDateTime,
) -> Result<OpenDoor, AppError> {
    let Some(secret) = secret else {
        return Err(AppError::NotFound);
    };
    let row = sqlx::query!(
        r#"SELECT l.event_id, l.door, l.valid_from, l.valid_until, e.title, e.venue, e.starts_at,
                e.time_zone AS "zone: Zone"
         FROM door_links l JOIN events e ON e.id = l.event_id
         WHERE l.secret_hash = $1 AND l.revoked_at IS NULL"#,
        &secret.hash(),
    )
    .fetch_optional(db)
    .await?
    .ok_or(AppError::NotFound)?;
    let window = DoorWindow {
        from: row.valid_from,
        until: row.valid_until,
    };
    if !window.contains(now) {
        return Err(AppError::NotFound);
    }
    Ok(OpenDoor {
        event_id: row.event_id.into(),
        door: DoorName::parse(&row.door).map_err(|e| AppError::internal(anyhow::anyhow!(e)))?,
        event_title: row.title,
        venue: row.venue,
        starts_at: row.starts_at,
        zone: row.zone,
    })
}
