//! The scenario's organizer, events and ticket types, written with plain SQL
//! that depends only on the schema in migrations/: the sale is open (it
//! opened an hour ago) and the events are published.

use anyhow::Context;
use rand::Rng;
use sqlx::PgPool;
use uuid::Uuid;

use crate::scenario::Plan;

/// What a run plays against.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Sale {
    /// A random tag in every buyer's email, unique to this run.
    pub tag: String,
    pub event_ids: Vec<Uuid>,
    pub ticket_types: Vec<TicketTypeRef>,
}

#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct TicketTypeRef {
    pub id: Uuid,
    pub event_id: Uuid,
}

impl Sale {
    pub fn ticket_type_ids(&self) -> Vec<Uuid> {
        self.ticket_types.iter().map(|t| t.id).collect()
    }
}

/// A short random tag: lower-case letters and digits.
pub fn run_tag() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..8)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect()
}

pub async fn create(db: &PgPool, plan: &Plan) -> anyhow::Result<Sale> {
    let tag = run_tag();
    let mut tx = db.begin().await?;
    let organizer_id = sqlx::query_scalar!(
        "INSERT INTO organizers (email, password_hash) VALUES ($1, 'stampede-load: no password')
         RETURNING id",
        format!("organizer-{tag}@load.example.org"),
    )
    .fetch_one(&mut *tx)
    .await
    .context("creating the organizer")?;
    let events = i32::try_from(plan.events)?;
    let event_ids = sqlx::query_scalar!(
        r#"INSERT INTO events (organizer_id, title, description, venue, starts_at, sale_opens_at, status,
                              hold_seconds, payment)
           SELECT $1, $2 || ' #' || n, 'Played by stampede-load.', 'Loopback Arena',
                  now() + interval '30 days', now() - interval '1 hour', 'published', $4,
                  CASE WHEN $5 THEN 'stripe' ELSE 'offline' END
           FROM generate_series(1, $3::int) AS n
           RETURNING id"#,
        organizer_id,
        format!("Stampede load {} {tag}", plan.kind.name()),
        events,
        plan.hold_seconds,
        plan.paid,
    )
    .fetch_all(&mut *tx)
    .await
    .context("creating the events")?;
    let per_event = i32::try_from(plan.ticket_types_per_event)?;
    let ticket_types = sqlx::query!(
        r#"INSERT INTO ticket_types
               (event_id, position, name, price_minor, currency, capacity, remaining,
                max_per_order, max_per_buyer)
           SELECT e.id, p.n - 1, 'Tier ' || p.n, 2500, 'EUR', $2, $2, $3, $4
           FROM UNNEST($1::uuid[]) WITH ORDINALITY AS e (id, ord)
           CROSS JOIN generate_series(1, $5::int) AS p (n)
           ORDER BY e.ord, p.n
           RETURNING id, event_id"#,
        &event_ids,
        plan.tickets,
        plan.max_per_order,
        plan.max_per_buyer,
        per_event,
    )
    .fetch_all(&mut *tx)
    .await
    .context("creating the ticket types")?;
    tx.commit().await?;
    Ok(Sale {
        tag,
        event_ids,
        ticket_types: ticket_types
            .into_iter()
            .map(|row| TicketTypeRef {
                id: row.id,
                event_id: row.event_id,
            })
            .collect(),
    })
}
