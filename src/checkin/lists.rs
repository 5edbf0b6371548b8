//! The organizer's reads for door devices: tickets by code prefix or
//! email, and the check-ins since a cursor (an offline device catches up).
//! Every query joins `events` on the organizer: another organizer's event
//! gives nothing, and the handlers answer "not found" before that.

use sqlx::PgPool;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::{
    domain::{CheckInCursor, Email, EventId, OrderId, OrderStatus, OrganizerId, TicketCode},
    error::AppError,
};

/// Whether the event exists and is this organizer's: "not found" otherwise.
pub async fn owned(
    db: &PgPool,
    organizer_id: OrganizerId,
    event_id: EventId,
) -> Result<(), AppError> {
    let owned = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM events WHERE id = $1 AND organizer_id = $2) AS "owned!""#,
        event_id.get(),
        organizer_id.get(),
    )
    .fetch_one(db)
    .await?;
    if owned {
        Ok(())
    } else {
        Err(AppError::NotFound)
    }
}

/// What a ticket search looks for.
#[derive(Debug, Clone)]
pub enum TicketQuery {
    CodePrefix(TicketCode),
    Email(Email),
}

/// One ticket of a search.
#[derive(Debug, Clone)]
pub struct TicketRow {
    pub code: String,
    pub order_id: OrderId,
    pub email: String,
    pub ticket_type: String,
    pub order_status: OrderStatus,
    pub redeemed_at: Option<OffsetDateTime>,
    pub door: Option<String>,
}

/// A page of tickets in code order; `next` is the last code when more
/// may follow.
#[derive(Debug, Clone)]
pub struct TicketPage {
    pub tickets: Vec<TicketRow>,
    pub next: Option<String>,
}

/// Tickets of an event whose code starts with a prefix, or whose order has
/// an email, after the code `after`, at most `limit`.
pub async fn search(
    db: &PgPool,
    organizer_id: OrganizerId,
    event_id: EventId,
    query: &TicketQuery,
    after: Option<&TicketCode>,
    limit: i64,
) -> Result<TicketPage, AppError> {
    let (prefix, email) = match query {
        TicketQuery::CodePrefix(code) => (Some(code.as_str()), None),
        TicketQuery::Email(email) => (None, Some(email.as_str())),
    };
    // Codes are upper-case letters and digits, compared byte by byte
    // (COLLATE "C"): every code starting with P lies in [P, P || '~').
    let rows = sqlx::query!(
        r#"SELECT t.code, o.id AS order_id, o.email, tt.name AS ticket_type,
                  o.status, t.redeemed_at, t.redeemed_door
           FROM tickets t
           JOIN orders o ON o.id = t.order_id
           JOIN ticket_types tt ON tt.id = o.ticket_type_id
           JOIN events e ON e.id = tt.event_id
           WHERE tt.event_id = $1 AND e.organizer_id = $2
             AND ($3::text IS NULL OR (t.code >= $3 AND t.code < $3 || '~'))
             AND ($4::text IS NULL OR o.email = $4)
             AND ($5::text IS NULL OR t.code > $5)
           ORDER BY t.code
           LIMIT $6"#,
        event_id.get(),
        organizer_id.get(),
        prefix,
        email,
        after.map(TicketCode::as_str),
        limit + 1,
    )
    .fetch_all(db)
    .await?;
    let more = rows.len() as i64 > limit;
    let mut tickets = Vec::with_capacity(rows.len());
    for row in rows.into_iter().take(limit as usize) {
        tickets.push(TicketRow {
            code: row.code,
            order_id: row.order_id.into(),
            email: row.email,
            ticket_type: row.ticket_type,
            order_status: OrderStatus::from_db(&row.status).ok_or_else(|| {
                AppError::internal(anyhow::anyhow!("unknown order status {}", row.status))
            })?,
            redeemed_at: row.redeemed_at,
            door: row.redeemed_door,
        });
    }
    let next = more
        .then(|| tickets.last().map(|t| t.code.clone()))
        .flatten();
    Ok(TicketPage { tickets, next })
}

/// One redemption.
#[derive(Debug, Clone)]
pub struct CheckIn {
    pub code: String,
    pub ticket_type: String,
    pub redeemed_at: OffsetDateTime,
    pub door: String,
    pub cursor: CheckInCursor,
}

/// A page of redemptions in cursor order. `next` is where the following
/// call goes on: the last one's cursor, or the one given when nothing
/// followed it yet. `more` says whether the page was full.
#[derive(Debug, Clone)]
pub struct CheckInPage {
    pub check_ins: Vec<CheckIn>,
    pub next: Option<CheckInCursor>,
    pub more: bool,
}

/// Redemptions of an event after `since` (all of them without), at most
/// `limit`. Only redemptions whose transaction is older than every
/// transaction still running are listed: a redemption that commits later
/// always has a larger cursor than one listed now, so walking the cursor
/// sees every redemption exactly once.
pub async fn since(
    db: &PgPool,
    organizer_id: OrganizerId,
    event_id: EventId,
    since: Option<CheckInCursor>,
    limit: i64,
) -> Result<CheckInPage, AppError> {
    let rows = sqlx::query!(
        r#"SELECT t.id, t.code, tt.name AS ticket_type, t.redeemed_at AS "redeemed_at!",
                  t.redeemed_door AS "door!", t.redeemed_seq AS "seq!"
           FROM tickets t
           JOIN orders o ON o.id = t.order_id
           JOIN ticket_types tt ON tt.id = o.ticket_type_id
           JOIN events e ON e.id = tt.event_id
           WHERE tt.event_id = $1 AND e.organizer_id = $2
             AND t.redeemed_seq IS NOT NULL
             AND (t.redeemed_seq, t.id) > ($3, $4)
             AND t.redeemed_seq < pg_snapshot_xmin(pg_current_snapshot())::text::bigint
           ORDER BY t.redeemed_seq, t.id
           LIMIT $5"#,
        event_id.get(),
        organizer_id.get(),
        since.map_or(-1, |c| c.seq),
        since.map_or(Uuid::nil(), |c| c.ticket_id),
        limit + 1,
    )
    .fetch_all(db)
    .await?;
    let more = rows.len() as i64 > limit;
    let check_ins: Vec<CheckIn> = rows
        .into_iter()
        .take(limit as usize)
        .map(|row| CheckIn {
            code: row.code,
            ticket_type: row.ticket_type,
            redeemed_at: row.redeemed_at,
            door: row.door,
            cursor: CheckInCursor {
                seq: row.seq,
                ticket_id: row.id,
            },
        })
        .collect();
    let next = check_ins.last().map(|c| c.cursor).or(since);
    Ok(CheckInPage {
        check_ins,
        next,
        more,
    })
}
