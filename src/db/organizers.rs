//! Organizer accounts and API tokens. Hashing passwords and minting tokens
//! is `auth`'s job; this is only their storage.

use sqlx::PgPool;
use time::OffsetDateTime;

use crate::{
    domain::{ApiTokenId, Email, OrganizerId},
    error::AppError,
};

/// An organizer account: who a session or a token acts for.
#[derive(Debug, Clone)]
pub struct Organizer {
    pub id: OrganizerId,
    pub email: String,
    /// Whether the address is proven (the mailed link was followed, or an
    /// operator made the account): only then may they publish.
    pub email_confirmed: bool,
}

/// A row of the settings page; the token itself is never stored.
#[derive(Debug, Clone)]
pub struct ApiToken {
    pub id: ApiTokenId,
    pub name: String,
    pub prefix: String,
    pub created_at: OffsetDateTime,
    pub last_used_at: Option<OffsetDateTime>,
    pub revoked_at: Option<OffsetDateTime>,
}

/// A new account, or `None` when the email is taken. Unless `confirmed`,
/// its address is not, and the mail with the link that confirms it is
/// asked for in the same transaction (`mail::requests` sends it).
pub async fn insert(
    db: &PgPool,
    email: &Email,
    password_hash: &str,
    confirmed: bool,
) -> Result<Option<Organizer>, AppError> {
    let mut tx = db.begin().await?;
    let organizer = sqlx::query_as!(
        Organizer,
        r#"INSERT INTO organizers (email, password_hash, email_confirmed_at)
           VALUES ($1, $2, CASE WHEN $3 THEN now() END)
           ON CONFLICT ON CONSTRAINT organizers_email_unique DO NOTHING
           RETURNING id, email, email_confirmed_at IS NOT NULL AS "email_confirmed!""#,
        email.as_str(),
        password_hash,
        confirmed,
    )
    .fetch_optional(&mut *tx)
    .await?;
    if organizer.as_ref().is_some_and(|o| !o.email_confirmed) {
        sqlx::query!(
            "INSERT INTO mail_requests (kind, email) VALUES ('organizer_confirm', $1)",
            email.as_str(),
        )
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(organizer)
}

/// Confirm the address of the account: true if it was not confirmed
/// before (a second click changes nothing).
pub async fn confirm_email(db: &PgPool, id: OrganizerId) -> Result<bool, AppError> {
    let mut tx = db.begin().await?;
    let confirmed = sqlx::query!(
        "UPDATE organizers SET email_confirmed_at = now()
         WHERE id = $1 AND email_confirmed_at IS NULL",
        id.get(),
    )
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    tx.commit().await?;
    Ok(confirmed)
}

/// Ask for the confirmation mail again, unless one was asked for within
/// `every` or the address is confirmed; true if asked. The organizer's
/// row lock makes two asks at once count each other.
pub async fn ask_confirmation_again(
    db: &PgPool,
    id: OrganizerId,
    every: std::time::Duration,
) -> Result<bool, AppError> {
    let mut tx = db.begin().await?;
    super::events::guard::lock_organizer(&mut tx, id).await?;
    let asked = sqlx::query!(
        "INSERT INTO mail_requests (kind, email)
         SELECT 'organizer_confirm', o.email FROM organizers o
         WHERE o.id = $1 AND o.email_confirmed_at IS NULL
           AND NOT EXISTS (SELECT 1 FROM mail_requests r
                           WHERE r.email = o.email AND r.kind = 'organizer_confirm'
                             AND r.requested_at > now() - $2::interval)",
        id.get(),
        super::pg_interval(every),
    )
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    tx.commit().await?;
    Ok(asked)
}

/// The account with this email and its password hash.
pub async fn with_password_hash(
    db: &PgPool,
    email: &Email,
) -> Result<Option<(Organizer, String)>, AppError> {
    let row = sqlx::query!(
        r#"SELECT id, email, password_hash, email_confirmed_at IS NOT NULL AS "email_confirmed!"
           FROM organizers WHERE email = $1"#,
        email.as_str()
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| {
        let organizer = Organizer {
            id: r.id.into(),
            email: r.email,
            email_confirmed: r.email_confirmed,
        };
        (organizer, r.password_hash)
    }))
}

pub async fn find(db: &PgPool, id: OrganizerId) -> Result<Option<Organizer>, AppError> {
    Ok(sqlx::query_as!(
        Organizer,
        r#"SELECT id, email, email_confirmed_at IS NOT NULL AS "email_confirmed!"
           FROM organizers WHERE id = $1"#,
        id.get()
    )
    .fetch_optional(db)
    .await?)
}

/// Insert a token unless the organizer already has `cap` live ones: false
/// then. The organizer's row is locked first, so that two creations at once
/// count each other (a count in the INSERT's own snapshot would not).
pub async fn insert_token(
    db: &PgPool,
    organizer_id: OrganizerId,
    name: &str,
    token_hash: &[u8],
    prefix: &str,
    cap: i64,
) -> Result<bool, AppError> {
    let mut tx = db.begin().await?;
    super::events::guard::lock_organizer(&mut tx, organizer_id).await?;
    let inserted = sqlx::query!(
        "INSERT INTO api_tokens (organizer_id, name, token_hash, prefix)
         SELECT $1, $2, $3, $4
         WHERE (SELECT count(*) FROM api_tokens
                WHERE organizer_id = $1 AND revoked_at IS NULL) < $5",
        organizer_id.get(),
        name,
        token_hash,
        prefix,
        cap,
    )
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    tx.commit().await?;
    Ok(inserted)
}

pub async fn list_tokens(
    db: &PgPool,
    organizer_id: OrganizerId,
) -> Result<Vec<ApiToken>, AppError> {
    Ok(sqlx::query_as!(
        ApiToken,
        "SELECT id, name, prefix, created_at, last_used_at, revoked_at FROM api_tokens
         WHERE organizer_id = $1 ORDER BY created_at DESC LIMIT 200",
        organizer_id.get(),
    )
    .fetch_all(db)
    .await?)
}

pub async fn revoke_token(
    db: &PgPool,
    organizer_id: OrganizerId,
    token_id: ApiTokenId,
) -> Result<(), AppError> {
    let mut tx = db.begin().await?;
    let revoked = sqlx::query!(
        "UPDATE api_tokens SET revoked_at = now()
         WHERE id = $1 AND organizer_id = $2 AND revoked_at IS NULL",
        token_id.get(),
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

/// The organizer a live (unrevoked) token hash belongs to, and the token's
/// id; marks it used.
pub async fn by_token_hash(
    db: &PgPool,
    token_hash: &[u8],
) -> Result<Option<(Organizer, ApiTokenId)>, AppError> {
    let mut tx = db.begin().await?;
    let row = sqlx::query!(
        r#"WITH used AS (
             UPDATE api_tokens SET last_used_at = now()
             WHERE token_hash = $1 AND revoked_at IS NULL
             RETURNING id, organizer_id
         )
         SELECT o.id, o.email, o.email_confirmed_at IS NOT NULL AS "email_confirmed!",
                used.id AS token_id
         FROM organizers o JOIN used ON used.organizer_id = o.id"#,
        token_hash,
    )
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(row.map(|row| {
        (
            Organizer {
                id: row.id.into(),
                email: row.email,
                email_confirmed: row.email_confirmed,
            },
            row.token_id.into(),
        )
    }))
}
