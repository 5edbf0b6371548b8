//! What every write to an organizer's events starts and ends with: the
//! organizer's row lock, and the quotas checked before the commit.

use crate::{
    domain::{EventId, InvalidField, OrganizerId, Quotas},
    error::AppError,
};

/// Take the organizer's row lock for the rest of the transaction: writes
/// that a quota counts queue on it, so each counts what the last committed.
pub(in crate::db) async fn lock_organizer(
    tx: &mut sqlx::PgConnection,
    organizer_id: OrganizerId,
) -> Result<(), AppError> {
    sqlx::query_file!("sql/events/lock_organizer.sql", organizer_id.get())
        .fetch_optional(tx)
        .await?;
    Ok(())
}

/// After a write, with the organizer's row locked: refuse (roll back) what
/// takes the organizer past a quota, and a publication by an organizer
/// whose address is not confirmed (the listing flood, issue 34). The published-events quota is checked
/// only when this write publishes, so an organizer over a lowered quota can
/// still edit.
pub(super) async fn check_quotas(
    tx: &mut sqlx::PgConnection,
    organizer_id: OrganizerId,
    event_id: EventId,
    quotas: &Quotas,
    publishes: bool,
) -> Result<(), AppError> {
    let counts = sqlx::query!(
        r#"SELECT
             (SELECT count(*) FROM events WHERE organizer_id = $1 AND status = 'published')
                 AS "published!",
             (SELECT count(*) FROM ticket_types WHERE event_id = $2) AS "ticket_types!",
             (SELECT COALESCE(SUM(t.capacity), 0)::int8 FROM ticket_types t
                  JOIN events e ON e.id = t.event_id
                  WHERE e.organizer_id = $1 AND e.status <> 'cancelled') AS "capacity!",
             (SELECT e.status = 'published' AND e.payment = 'stripe'
                     AND EXISTS (SELECT 1 FROM ticket_types t
                                 WHERE t.event_id = e.id AND t.price_minor > 0)
                  FROM events e WHERE e.id = $2) AS "needs_stripe?",
             (SELECT email_confirmed_at IS NOT NULL FROM organizers WHERE id = $1)
                 AS "email_confirmed!""#,
        organizer_id.get(),
        event_id.get(),
    )
    .fetch_one(tx)
    .await?;
    let refuse =
        |field: &str, message: String| Err(AppError::Invalid(InvalidField::new(field, message)));
    if counts.ticket_types > quotas.ticket_types_per_event {
        return refuse(
            "ticket_types",
            format!(
                "An event can have at most {} ticket types; this one would have {}.",
                quotas.ticket_types_per_event, counts.ticket_types
            ),
        );
    }
    if publishes && !counts.email_confirmed {
        return refuse(
            "status",
            "Confirm your email address before publishing: follow the link in the mail we \
             sent when you signed up (your events page mails it again). You can keep \
             preparing the event as a draft meanwhile."
                .to_owned(),
        );
    }
    if publishes && counts.published > quotas.published_events {
        return refuse(
            "status",
            format!(
                "You can have at most {} published events at once; unpublish or cancel one first.",
                quotas.published_events
            ),
        );
    }
    if counts.needs_stripe == Some(true) && !quotas.stripe_connected {
        return refuse(
            "payment",
            "Buyers cannot pay for tickets with a price yet: this server is not connected to \
             Stripe (--stripe-secret-key). Make the tickets free, choose to collect the money \
             yourself, or ask the operator to connect Stripe."
                .to_owned(),
        );
    }
    if counts.capacity > quotas.total_capacity {
        return refuse(
            "ticket_types",
            format!(
                "Your events together can hold at most {} tickets; this would make {}.",
                quotas.total_capacity, counts.capacity
            ),
        );
    }
    Ok(())
}
