//! Mails asked for outside the outbox (`mail_requests`): a buyer's "find
//! my tickets", one mail listing the links of their orders, an
//! organizer's resend of one order's tickets, and the link that confirms
//! a new organizer's address.
//!
//! Asking writes a row; the mailer of any instance claims pending rows for
//! a minute (a lease, so no transaction stays open while the SMTP server
//! answers), sends each and marks it sent.

use std::time::Duration;

use sqlx::PgPool;
use time::OffsetDateTime;
use uuid::Uuid;

use super::{MailSettings, RoundError, Transport, deliver, message, order_mail};
use crate::{
    domain::{ConfirmKey, Email, EventId, OrderId, OrganizerId, Zone},
    error::AppError,
};

/// One "find my tickets" mail per address in this long, whoever asks.
pub const LOOKUP_EVERY: Duration = Duration::from_secs(10 * 60);
/// Resends of one order: one in this long.
pub const RESEND_EVERY: Duration = Duration::from_secs(60);
/// The most orders one lookup mail lists (the newest events first).
const LOOKUP_ORDERS: i64 = 50;
const CLAIM: Duration = Duration::from_secs(60);
/// Requests claimed at once: sent one after another, they are all out well
/// within their lease, so no other mailer takes one still being sent.
const CLAIM_BATCH: i64 = 8;

/// Ask for the mail listing this address's orders. Answers the same
/// whether the address has orders or not (the mailer finds out, and sends
/// nothing for none), and asks nothing again within [`LOOKUP_EVERY`].
pub async fn ask_lookup(db: &PgPool, email: &Email, now: OffsetDateTime) -> Result<(), AppError> {
    let mut tx = one_asker_at_a_time(db, &format!("lookup:{}", email.as_str())).await?;
    sqlx::query!(
        "INSERT INTO mail_requests (kind, email, requested_at)
         SELECT 'lookup', $1, $2
         WHERE NOT EXISTS (SELECT 1 FROM mail_requests
                           WHERE email = $1 AND kind = 'lookup' AND requested_at > $2::timestamptz - $3::interval)",
        email.as_str(),
        now,
        crate::db::pg_interval(LOOKUP_EVERY),
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Ask to mail a confirmed order of this organizer's (of this event, if
/// given) its tickets again. Another organizer's order is "not found"; one
/// not confirmed is refused. Within [`RESEND_EVERY`] of the last, nothing
/// more is asked (the answer is the same: the mail is on its way).
pub async fn ask_resend(
    db: &PgPool,
    organizer_id: OrganizerId,
    event_id: Option<EventId>,
    order_id: OrderId,
    now: OffsetDateTime,
) -> Result<(), AppError> {
    let status = sqlx::query_scalar!(
        "SELECT o.status FROM orders o
         JOIN ticket_types t ON t.id = o.ticket_type_id
         JOIN events e ON e.id = t.event_id
         WHERE o.id = $1 AND ($2::uuid IS NULL OR e.id = $2) AND e.organizer_id = $3",
        order_id.get(),
        event_id.map(EventId::get),
        organizer_id.get(),
    )
    .fetch_optional(db)
    .await?
    .ok_or(AppError::NotFound)?;
    if status != "confirmed" {
        return Err(AppError::NotConfirmed);
    }
    let mut tx = one_asker_at_a_time(db, &format!("resend:{order_id}")).await?;
    sqlx::query!(
        "INSERT INTO mail_requests (kind, order_id, email, requested_at)
         SELECT 'resend', o.id, o.email, $2 FROM orders o
         WHERE o.id = $1
           AND NOT EXISTS (SELECT 1 FROM mail_requests r WHERE r.order_id = $1
                           AND (r.sent_at IS NULL OR r.requested_at > $2::timestamptz - $3::interval))",
        order_id.get(),
        now,
        crate::db::pg_interval(RESEND_EVERY),
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// A transaction holding the advisory lock of `key`: two asks at once for
/// one address (or order) see each other, so one mail is asked for, not two.
async fn one_asker_at_a_time(
    db: &PgPool,
    key: &str,
) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, sqlx::Error> {
    let mut tx = db.begin().await?;
    sqlx::query!(
        "SELECT pg_advisory_xact_lock(hashtextextended($1, 36))",
        key
    )
    .execute(&mut *tx)
    .await?;
    Ok(tx)
}

struct Claimed {
    id: Uuid,
    kind: String,
    order_id: Option<Uuid>,
    email: String,
}

/// Claim up to [`CLAIM_BATCH`] pending requests, send them, mark each sent
/// as it goes; returns how many were claimed. A mail the server cannot take now
/// ends the round (its lease runs out and it is tried again).
pub(super) async fn round(
    db: &PgPool,
    key: &ConfirmKey,
    settings: &MailSettings,
    transport: &Transport,
) -> Result<usize, RoundError> {
    let mut tx = db.begin().await?;
    let claimed = sqlx::query_as!(
        Claimed,
        "UPDATE mail_requests r SET claimed_until = now() + $2::interval
         FROM (SELECT id FROM mail_requests
               WHERE sent_at IS NULL AND (claimed_until IS NULL OR claimed_until < now())
               ORDER BY requested_at LIMIT $1 FOR UPDATE SKIP LOCKED) due
         WHERE r.id = due.id
         RETURNING r.id, r.kind, r.order_id, r.email",
        CLAIM_BATCH,
        crate::db::pg_interval(CLAIM),
    )
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    for request in &claimed {
        send(db, key, settings, transport, request).await?;
        let mut tx = db.begin().await?;
        sqlx::query!(
            "UPDATE mail_requests SET sent_at = now() WHERE id = $1",
            request.id
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
    }
    Ok(claimed.len())
}

async fn send(
    db: &PgPool,
    key: &ConfirmKey,
    settings: &MailSettings,
    transport: &Transport,
    request: &Claimed,
) -> Result<(), RoundError> {
    match (request.kind.as_str(), request.order_id) {
        ("resend", Some(order_id)) => {
            let order_id = OrderId::from(order_id);
            // Cancelled since it was asked: nothing to send.
            let Some(facts) = order_mail::facts(db, order_id)
                .await?
                .filter(|facts| facts.status == "confirmed")
            else {
                return Ok(());
            };
            let link = super::order_link(key, &settings.public_url, order_id);
            log_without_smtp(transport, request, &link);
            let recipient = facts.email.clone();
            let (owned, id) = (settings.clone(), request.id);
            let build = move || {
                order_mail::tickets_message(&owned, id, &facts, &link, OffsetDateTime::now_utc())
            };
            deliver(transport, id, &recipient, build).await.map(drop)
        }
        ("organizer_confirm", None) => {
            // Confirmed meanwhile (an earlier mail's link): nothing to send.
            let Some(organizer) = unconfirmed_organizer(db, &request.email).await? else {
                return Ok(());
            };
            let link = super::organizer_link(key, &settings.public_url, organizer);
            log_without_smtp(transport, request, &link);
            let body = format!(
                "Welcome to Stampede. To publish events, confirm that this address is yours:\n\n\
                 {link}\n\n\
                 The link opens a page with a button; nothing changes until you press it.\n\
                 If you did not sign up, ignore this mail: the account cannot publish anything.\n"
            );
            let message = message::plain_message(
                settings,
                request.id,
                &request.email,
                "Confirm your organizer address",
                body,
            );
            deliver(transport, request.id, &request.email, move || Ok(message))
                .await
                .map(drop)
        }
        _ => {
            let orders = lookup_orders(db, &request.email).await?;
            if orders.is_empty() {
                return Ok(());
            }
            for order in &orders {
                let link = super::order_link(key, &settings.public_url, OrderId::from(order.id));
                log_without_smtp(transport, request, &link);
            }
            let body = lookup_text(key, &settings.public_url, &orders);
            let message =
                message::plain_message(settings, request.id, &request.email, "Your tickets", body);
            deliver(transport, request.id, &request.email, move || Ok(message))
                .await
                .map(drop)
        }
    }
}

/// Without SMTP (development), the links a mail would carry are logged, as
/// the outbox's mails do: an organizer can still confirm their address.
fn log_without_smtp(transport: &Transport, request: &Claimed, link: &str) {
    if matches!(transport, Transport::Log) {
        tracing::info!(kind = %request.kind, recipient = %request.email, %link,
            "mail link (no SMTP configured)");
    }
}

async fn unconfirmed_organizer(
    db: &PgPool,
    email: &str,
) -> Result<Option<OrganizerId>, sqlx::Error> {
    let id = sqlx::query_scalar!(
        "SELECT id FROM organizers WHERE email = $1 AND email_confirmed_at IS NULL",
        email
    )
    .fetch_optional(db)
    .await?;
    Ok(id.map(OrganizerId::from))
}

struct Listed {
    id: Uuid,
    status: String,
    quantity: i32,
    ticket_type: String,
    title: String,
    starts_at: OffsetDateTime,
    zone: Zone,
}

async fn lookup_orders(db: &PgPool, email: &str) -> Result<Vec<Listed>, sqlx::Error> {
    sqlx::query_as!(
        Listed,
        r#"SELECT o.id, o.status, o.quantity, t.name AS ticket_type, e.title, e.starts_at,
                  e.time_zone AS "zone: Zone"
           FROM orders o
           JOIN ticket_types t ON t.id = o.ticket_type_id
           JOIN events e ON e.id = t.event_id
           WHERE o.email = $1 AND o.status IN ('confirmed', 'held')
           ORDER BY e.starts_at DESC, o.created_at DESC
           LIMIT $2"#,
        email,
        LOOKUP_ORDERS,
    )
    .fetch_all(db)
    .await
}

fn lookup_text(key: &ConfirmKey, public_url: &str, orders: &[Listed]) -> String {
    let mut text = String::from("Here are the links to your orders, as you asked:\n\n");
    for order in orders {
        let held = if order.status == "held" {
            " (held, not yet confirmed)"
        } else {
            ""
        };
        text.push_str(&format!(
            "{title}, {when}: {quantity} × {ticket_type}{held}\n{link}\n\n",
            title = order.title,
            when = order.zone.format(order.starts_at),
            quantity = order.quantity,
            ticket_type = order.ticket_type,
            link = super::order_link(key, public_url, OrderId::from(order.id)),
        ));
    }
    text.push_str("If you did not ask for this mail, you can ignore it: the links work only for whoever has this mailbox.\n");
    text
}
