//! Waiting lists, one per ticket type: buyers join a sold-out type's list
//! and confirm their address from a mail; stock that comes back is offered
//! to the first in line as a held order.
//!
//! The offers ([`offer_returned_stock`]) run inside the transaction that
//! frees the stock (a cancel, an expired hold, a raised capacity, the
//! organizer switching offers on), after the statement that put the tickets
//! back: that statement locked the ticket type's row, so offers for one
//! type take turns, and the tickets go from the one who gave them back to
//! the one first in line without ever being on sale in between: a bot
//! refreshing the event page never sees them. An offer is an ordinary held
//! order (`src/sale/holds.rs`): its stock and the buyer's limits are taken
//! by the sale's own statements, its mail goes out through the outbox, and
//! when it expires its stock comes back, and so goes to the next in line.

use sqlx::PgPool;
use time::OffsetDateTime;
use uuid::Uuid;

mod offers;

pub use offers::{offer_returned_stock, set_offers};

use crate::{
    domain::{
        ConfirmKey, ConfirmToken, Email, EntryCursor, EntryQuery, EventId, InvalidField, OrderId,
        OrderStatus, OrganizerId, Quantity, TicketTypeId, WaitlistEntryId, WaitlistStatus, Zone,
    },
    error::AppError,
};

/// How long a place waits for its address to be confirmed before a new
/// join of the same address replaces it.
pub const UNCONFIRMED_FOR: time::Duration = time::Duration::hours(1);

/// Joins (each one a mail) one address may make across every waiting list
/// per [`JOINS_PER_ADDRESS_WINDOW`]; beyond, 429 with the real wait.
pub const JOINS_PER_ADDRESS: i64 = 5;
pub const JOINS_PER_ADDRESS_WINDOW: time::Duration = time::Duration::hours(1);

/// What joining did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Joined {
    /// A new place, waiting for its mail to be confirmed.
    New(WaitlistEntryId),
    /// This address already has a place (confirmed, or unconfirmed for
    /// less than [`UNCONFIRMED_FOR`]) on this list; nothing was written and
    /// no second mail goes out.
    Already,
}

/// Join a sold-out ticket type's waiting list with `email`, for `quantity`
/// tickets. The place counts once its address is confirmed: the outbox
/// asks the mailer for the link (`waitlist.joined`), in the same statement.
pub async fn join(
    db: &PgPool,
    key: &ConfirmKey,
    now: OffsetDateTime,
    event_id: EventId,
    ticket_type_id: TicketTypeId,
    email: &Email,
    quantity: Quantity,
) -> Result<Joined, AppError> {
    let row = sqlx::query!(
        r#"SELECT t.remaining, LEAST(t.max_per_order, t.max_per_buyer) AS "most!", t.hidden,
                  sale_open(t.event_status, t.event_sale_opens_at, t.event_sale_closes_at,
                            t.event_starts_at, $3) AS "open!"
           FROM ticket_types t WHERE t.id = $1 AND t.event_id = $2 AND t.event_status = 'published'"#,
        ticket_type_id.get(),
        event_id.get(),
        now,
    )
    .fetch_optional(db)
    .await?;
    let row = match row {
        Some(row) if !row.hidden => row,
        _ => return Err(AppError::NotFound),
    };
    if !row.open {
        return Err(AppError::SaleClosed(
            "The sale is not open, and neither is its waiting list.",
        ));
    }
    if row.remaining > 0 {
        return Err(AppError::NotSoldOut);
    }
    if quantity.get() > row.most {
        return Err(InvalidField::new(
            "quantity",
            format!("At most {} tickets of this type per buyer.", row.most),
        )
        .into());
    }
    let entry_id = WaitlistEntryId::from(Uuid::new_v4());
    let token_hash = key.waitlist_token(entry_id).hash();
    let buyer = crate::domain::BuyerKey::from(email);
    // Each join mails the address: a cap per address and hour across every
    // list, so that the lists cannot be used to flood someone's mailbox.
    let since = now - JOINS_PER_ADDRESS_WINDOW;
    let recent = sqlx::query_file!("sql/waitlist/recent_joins.sql", buyer.as_str(), since)
        .fetch_one(db)
        .await?;
    if recent.joins >= JOINS_PER_ADDRESS {
        let free_at = recent.oldest.unwrap_or(now) + JOINS_PER_ADDRESS_WINDOW;
        return Err(AppError::TooManyRequests {
            retry_after_secs: (free_at - now).as_seconds_f64().ceil().max(1.0) as u64,
        });
    }
    // A place whose mail was never followed does not block its address
    // for good (a lost mail, or someone else typing it): after an hour, a
    // new join replaces it, with a new mail.
    let mut tx = db.begin().await?;
    sqlx::query_file!(
        "sql/waitlist/drop_unconfirmed.sql",
        ticket_type_id.get(),
        buyer.as_str(),
        now - UNCONFIRMED_FOR,
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    let mut tx = db.begin().await?;
    let joined = sqlx::query_file_scalar!(
        "sql/waitlist/join.sql",
        entry_id.get(),
        ticket_type_id.get(),
        email.as_str(),
        buyer.as_str(),
        quantity.get(),
        token_hash,
        now,
    )
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(match joined {
        Some(id) => Joined::New(WaitlistEntryId::from(id)),
        None => Joined::Already,
    })
}

/// A place as its holder sees it (through the link in their mail).
#[derive(Debug, Clone)]
pub struct Entry {
    pub id: WaitlistEntryId,
    pub event_id: EventId,
    pub event_title: String,
    pub ticket_type_name: String,
    pub email: String,
    pub quantity: i32,
    pub status: WaitlistStatus,
    /// People before this one in line, while waiting.
    pub ahead: Option<i64>,
    pub order_id: Option<OrderId>,
    pub order_status: Option<OrderStatus>,
    pub hold_expires_at: Option<OffsetDateTime>,
    /// The event's: the page's times are local times in it.
    pub zone: Zone,
    /// Tickets of the type on sale right now.
    pub remaining: i32,
}

/// The place, for the holder of its token; [`AppError::Forbidden`] with
/// another token.
pub async fn find(
    db: &PgPool,
    entry_id: WaitlistEntryId,
    token: &ConfirmToken,
) -> Result<Entry, AppError> {
    let row = sqlx::query!(
        r#"SELECT w.id, t.event_id, e.title, t.name, w.email, w.quantity, w.token_hash,
                  w.status AS "status: WaitlistStatus", t.remaining,
                  CASE WHEN w.status = 'waiting' THEN
                      (SELECT count(*) FROM waitlist_entries a
                       WHERE a.ticket_type_id = w.ticket_type_id AND a.status = 'waiting'
                         AND a.position < w.position)
                  END AS ahead,
                  o.id AS "order_id?",
                  CASE WHEN o.cancel_reason = 'expired' THEN 'expired' ELSE o.status END
                      AS "order_status?: OrderStatus",
                  o.hold_expires_at AS "hold_expires_at?", e.time_zone AS "zone: Zone"
           FROM waitlist_entries w
           JOIN ticket_types t ON t.id = w.ticket_type_id
           JOIN events e ON e.id = t.event_id
           LEFT JOIN orders o ON o.id = w.order_id
           WHERE w.id = $1"#,
        entry_id.get(),
    )
    .fetch_optional(db)
    .await?
    .ok_or(AppError::NotFound)?;
    if row.token_hash != token.hash() {
        return Err(AppError::Forbidden(
            "This link is not valid for this place on the waiting list.",
        ));
    }
    Ok(Entry {
        id: WaitlistEntryId::from(row.id),
        event_id: EventId::from(row.event_id),
        event_title: row.title,
        ticket_type_name: row.name,
        email: row.email,
        quantity: row.quantity,
        status: row.status,
        ahead: row.ahead,
        order_id: row.order_id.map(OrderId::from),
        order_status: row.order_status,
        hold_expires_at: row.hold_expires_at,
        zone: row.zone,
        remaining: row.remaining,
    })
}

/// Confirm a place from the mailed link: it gets its position in line now.
/// A second click changes nothing.
pub async fn confirm(
    db: &PgPool,
    now: OffsetDateTime,
    entry_id: WaitlistEntryId,
    token: &ConfirmToken,
) -> Result<Entry, AppError> {
    let mut tx = db.begin().await?;
    let confirmed = sqlx::query_file_scalar!(
        "sql/waitlist/confirm_place.sql",
        entry_id.get(),
        token.hash(),
        now
    )
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    if confirmed.is_some() {
        tracing::info!(%entry_id, "waiting list place confirmed");
        metrics::counter!("stampede_waitlist_confirmed_total").increment(1);
    }
    find(db, entry_id, token).await
}

/// Leave the list (before an offer); leaving twice is no error.
pub async fn leave(
    db: &PgPool,
    entry_id: WaitlistEntryId,
    token: &ConfirmToken,
) -> Result<Entry, AppError> {
    let mut tx = db.begin().await?;
    sqlx::query_file_scalar!("sql/waitlist/leave.sql", entry_id.get(), token.hash())
        .fetch_optional(&mut *tx)
        .await?;
    tx.commit().await?;
    find(db, entry_id, token).await
}

/// One place, as the organizer sees it.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ListedEntry {
    pub id: WaitlistEntryId,
    pub ticket_type_id: TicketTypeId,
    pub email: String,
    pub quantity: i32,
    pub status: WaitlistStatus,
    #[serde(with = "time::serde::rfc3339")]
    pub joined_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub offered_at: Option<OffsetDateTime>,
    pub order_id: Option<OrderId>,
}

/// An event's waiting lists for its organizer.
#[derive(Debug, Clone)]
pub struct EventLists {
    pub offers_on: bool,
    /// How many wait in line, per ticket type (types without anyone absent).
    pub lengths: Vec<(TicketTypeId, i64)>,
    /// A page of the places, by ticket type, those in line first in their
    /// order.
    pub entries: Vec<ListedEntry>,
    /// Where the next page starts, if there is one.
    pub next: Option<EntryCursor>,
}

impl EventLists {
    /// How many wait in line for the ticket type.
    pub fn waiting(&self, ticket_type_id: TicketTypeId) -> i64 {
        self.lengths
            .iter()
            .find(|(id, _)| *id == ticket_type_id)
            .map_or(0, |(_, n)| *n)
    }
}

/// The event's lists, if it is this organizer's, with the page of places
/// `page` names.
pub async fn list(
    db: &PgPool,
    organizer_id: OrganizerId,
    event_id: EventId,
    page: &EntryQuery,
) -> Result<EventLists, AppError> {
    let offers_on = sqlx::query_scalar!(
        "SELECT waitlist_offers FROM events WHERE id = $1 AND organizer_id = $2",
        event_id.get(),
        organizer_id.get(),
    )
    .fetch_optional(db)
    .await?
    .ok_or(AppError::NotFound)?;
    let lengths = sqlx::query!(
        r#"SELECT w.ticket_type_id, count(*) AS "waiting!"
           FROM waitlist_entries w JOIN ticket_types t ON t.id = w.ticket_type_id
           WHERE t.event_id = $1 AND w.status = 'waiting' GROUP BY w.ticket_type_id"#,
        event_id.get(),
    )
    .fetch_all(db)
    .await?
    .into_iter()
    .map(|row| (TicketTypeId::from(row.ticket_type_id), row.waiting))
    .collect();
    let after = page.after;
    // The list's order, as a key: a place without a position in line sorts
    // last (i64::MAX) among the settled ones.
    let mut rows = sqlx::query!(
        r#"SELECT w.id, w.ticket_type_id, w.email, w.quantity, w.status AS "status: WaitlistStatus",
                  w.created_at, w.offered_at, w.order_id, t.position AS type_position,
                  w.status <> 'waiting' AS "settled!",
                  COALESCE(w.position, 9223372036854775807) AS "line_position!"
           FROM waitlist_entries w JOIN ticket_types t ON t.id = w.ticket_type_id
           WHERE t.event_id = $1
             AND ($2::int4 IS NULL
                  OR (t.position, w.status <> 'waiting', COALESCE(w.position, 9223372036854775807),
                      w.created_at, w.id) > ($2, $3::bool, $4::int8, $5::timestamptz, $6::uuid))
           ORDER BY t.position, w.status <> 'waiting', COALESCE(w.position, 9223372036854775807),
                    w.created_at, w.id
           LIMIT $7"#,
        event_id.get(),
        after.map(|c| c.type_position),
        after.map(|c| c.settled),
        after.map(|c| c.line_position),
        after.map(|c| c.joined_at),
        after.map(|c| c.id),
        page.limit + 1,
    )
    .fetch_all(db)
    .await?;
    let next = if rows.len() as i64 > page.limit {
        rows.truncate(page.limit as usize);
        rows.last().map(|row| EntryCursor {
            type_position: row.type_position,
            settled: row.settled,
            line_position: row.line_position,
            joined_at: row.created_at,
            id: row.id,
        })
    } else {
        None
    };
    let entries = rows
        .into_iter()
        .map(|row| ListedEntry {
            id: WaitlistEntryId::from(row.id),
            ticket_type_id: TicketTypeId::from(row.ticket_type_id),
            email: row.email,
            quantity: row.quantity,
            status: row.status,
            joined_at: row.created_at,
            offered_at: row.offered_at,
            order_id: row.order_id.map(OrderId::from),
        })
        .collect();
    Ok(EventLists {
        offers_on,
        lengths,
        entries,
        next,
    })
}
