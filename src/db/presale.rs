//! Presale codes for organizers (create, list a page at a time) and buyers (which hidden
//! ticket types a code unlocks). Their uses are taken and given back by the
//! sale path (`sql/sale/`).

use sqlx::PgPool;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::{
    domain::{
        CodeCursor, CodeQuery, EventId, InvalidField, NewCodes, OrganizerId, PresaleCode, Quotas,
        TicketTypeId,
    },
    error::AppError,
};

/// A code as its organizer sees it.
#[derive(Debug, Clone)]
pub struct CodeSummary {
    pub id: Uuid,
    pub code: String,
    pub max_uses: i32,
    pub used: i32,
    pub valid_from: Option<OffsetDateTime>,
    pub valid_until: Option<OffsetDateTime>,
    pub ticket_type_ids: Vec<Uuid>,
    pub created_at: OffsetDateTime,
}

/// Create codes for one of this organizer's events, unlocking ticket types
/// of that event; all or none. A code the event has already is refused
/// (422 on `code`), and so are codes past the event's quota (422 on
/// `count`): counted with the event's row locked, so creations at once
/// queue on it and each counts what the last committed.
pub async fn create(
    db: &PgPool,
    organizer_id: OrganizerId,
    event_id: EventId,
    quotas: &Quotas,
    new: &NewCodes,
) -> Result<Vec<CodeSummary>, AppError> {
    let types: Vec<Uuid> = new.ticket_type_ids.iter().map(|t| t.get()).collect();
    let mut tx = db.begin().await?;
    // NO KEY UPDATE: purchases (which only reference the event) are not held.
    sqlx::query_scalar!(
        "SELECT id FROM events WHERE id = $1 AND organizer_id = $2 FOR NO KEY UPDATE",
        event_id.get(),
        organizer_id.get(),
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(AppError::NotFound)?;
    let existing = sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM presale_codes WHERE event_id = $1"#,
        event_id.get(),
    )
    .fetch_one(&mut *tx)
    .await?;
    let adding = new.codes.len() as i64;
    if existing + adding > quotas.presale_codes_per_event {
        return Err(InvalidField::new(
            "count",
            format!(
                "An event can have at most {} presale codes; this one has {existing}, \
                 so {} more at most.",
                quotas.presale_codes_per_event,
                (quotas.presale_codes_per_event - existing).max(0)
            ),
        )
        .into());
    }
    let of_event = sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM ticket_types WHERE event_id = $1 AND id = ANY($2)"#,
        event_id.get(),
        &types,
    )
    .fetch_one(&mut *tx)
    .await?;
    if of_event != types.len() as i64 {
        return Err(
            InvalidField::new("ticket_type_ids", "Choose ticket types of this event.").into(),
        );
    }
    let codes: Vec<&str> = new.codes.iter().map(PresaleCode::as_str).collect();
    let created = sqlx::query_scalar!(
        "INSERT INTO presale_codes (event_id, code, max_uses, valid_from, valid_until)
         SELECT $1, c, $3, $4, $5 FROM unnest($2::text[]) AS c
         RETURNING id",
        event_id.get(),
        &codes as &[&str],
        new.max_uses,
        new.valid_from,
        new.valid_until,
    )
    .fetch_all(&mut *tx)
    .await
    .map_err(|err| match &err {
        sqlx::Error::Database(db) if db.constraint() == Some("presale_codes_unique_in_event") => {
            AppError::from(InvalidField::new(
                "code",
                "This event has that code already (or a generated one collided: try again).",
            ))
        }
        _ => AppError::from(err),
    })?;
    sqlx::query!(
        "INSERT INTO presale_code_ticket_types (code_id, ticket_type_id)
         SELECT c, t FROM unnest($1::uuid[]) AS c CROSS JOIN unnest($2::uuid[]) AS t",
        &created,
        &types,
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    tracing::info!(%event_id, count = created.len(), "presale codes created");
    // Only the new codes are read back (not every code of the event, which
    // made each creation slower than the last).
    Ok(sqlx::query_as!(
        CodeSummary,
        r#"SELECT c.id, c.code, c.max_uses, c.used, c.valid_from, c.valid_until, c.created_at,
                  coalesce((SELECT array_agg(u.ticket_type_id ORDER BY u.ticket_type_id)
                            FROM presale_code_ticket_types u WHERE u.code_id = c.id), '{}')
                      AS "ticket_type_ids!"
           FROM presale_codes c
           WHERE c.id = ANY($1)
           ORDER BY c.created_at, c.code"#,
        &created,
    )
    .fetch_all(db)
    .await?)
}

/// A page of the event's codes, oldest first (then by code), and the
/// cursor of the next page if there is one.
pub async fn page(
    db: &PgPool,
    organizer_id: OrganizerId,
    event_id: EventId,
    query: &CodeQuery,
) -> Result<(Vec<CodeSummary>, Option<CodeCursor>), AppError> {
    super::events::find_owned(db, organizer_id, event_id).await?;
    let (after_at, after_code) = query
        .after
        .as_ref()
        .map(|c| (c.created_at, c.code.as_str()))
        .unzip();
    let mut codes = sqlx::query_as!(
        CodeSummary,
        r#"SELECT c.id, c.code, c.max_uses, c.used, c.valid_from, c.valid_until, c.created_at,
                  coalesce((SELECT array_agg(u.ticket_type_id ORDER BY u.ticket_type_id)
                            FROM presale_code_ticket_types u WHERE u.code_id = c.id), '{}')
                      AS "ticket_type_ids!"
           FROM presale_codes c
           WHERE c.event_id = $1
             AND ($2::timestamptz IS NULL OR (c.created_at, c.code) > ($2, $3::text))
           ORDER BY c.created_at, c.code
           LIMIT $4"#,
        event_id.get(),
        after_at,
        after_code,
        query.limit + 1,
    )
    .fetch_all(db)
    .await?;
    let next = if codes.len() as i64 > query.limit {
        codes.truncate(query.limit as usize);
        codes.last().map(|c| CodeCursor {
            created_at: c.created_at,
            code: c.code.clone(),
        })
    } else {
        None
    };
    Ok((codes, next))
}

/// The hidden ticket types of the event that `code` unlocks at `now`.
pub async fn unlocked_hidden(
    db: &PgPool,
    event_id: EventId,
    code: &PresaleCode,
    now: OffsetDateTime,
) -> Result<Vec<TicketTypeId>, AppError> {
    let ids = sqlx::query_scalar!(
        "SELECT t.id FROM presale_codes c
         JOIN presale_code_ticket_types u ON u.code_id = c.id
         JOIN ticket_types t ON t.id = u.ticket_type_id
         WHERE c.event_id = $1 AND c.code = $2 AND t.hidden
           AND (c.valid_from IS NULL OR c.valid_from <= $3)
           AND (c.valid_until IS NULL OR $3 < c.valid_until)",
        event_id.get(),
        code.as_str(),
        now,
    )
    .fetch_all(db)
    .await?;
    Ok(ids.into_iter().map(TicketTypeId::from).collect())
}
