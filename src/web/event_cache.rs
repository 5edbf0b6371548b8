//! The rush page's data: what every buyer of an event sees alike (the event,
//! its ticket types, what is left), kept in process for about a second, so
//! that thousands of refreshes cost one query per second. Only what is per
//! visitor (the CSRF token, the form's idempotency key) is made per request.
//!
//! Stock shown may be up to [`FRESH_FOR`] stale; stock sold never is, since
//! the purchase path checks it in its own transaction. An organizer's own
//! change through this instance drops the entry at once.

use std::{sync::Arc, time::Duration};

use moka::future::Cache;
use sqlx::PgPool;

use crate::{
    db::{
        self,
        events::{EventDetail, TicketType},
    },
    domain::{EventId, TicketTypeId},
    error::AppError,
    sale::Sales,
};

/// How stale the shown event may be: a halted or cancelled ticket type is
/// no longer offered after this.
pub const FRESH_FOR: Duration = Duration::from_secs(1);

/// Events at most; beyond, the least used are dropped.
const CAPACITY: u64 = 10_000;

#[derive(Clone)]
pub struct EventCache {
    /// `None`: no such published event (cached too: a flood of requests
    /// for a missing id costs no more than one for a real one).
    entries: Cache<EventId, Option<Arc<EventDetail>>>,
}

impl EventCache {
    pub fn new() -> Self {
        Self {
            entries: Cache::builder()
                .max_capacity(CAPACITY)
                .time_to_live(FRESH_FOR)
                .build(),
        }
    }

    /// The published (or cancelled) event, as of at most [`FRESH_FOR`] ago;
    /// a ticket type this instance knows to be sold out shows none left at
    /// once. Concurrent misses for one event wait for a single query.
    pub async fn published(
        &self,
        db: &PgPool,
        sales: &Sales,
        event_id: EventId,
    ) -> Result<Arc<EventDetail>, AppError> {
        let entry = self
            .entries
            .try_get_with(event_id, async {
                match db::events::find_published(db, event_id).await {
                    Ok(detail) => Ok(Some(Arc::new(detail))),
                    Err(AppError::NotFound) => Ok(None),
                    Err(err) => Err(err),
                }
            })
            .await
            .map_err(|err: Arc<AppError>| match *err {
                AppError::Overloaded => AppError::Overloaded,
                _ => AppError::internal(anyhow::anyhow!("loading event {event_id}: {err}")),
            })?;
        let detail = entry.ok_or(AppError::NotFound)?;
        let sold_out = |t: &TicketType| t.remaining > 0 && sales.known_sold_out(t.id);
        if !detail.ticket_types.iter().any(sold_out) {
            return Ok(detail);
        }
        let mut fresher = EventDetail::clone(&detail);
        for ticket_type in &mut fresher.ticket_types {
            if sold_out(ticket_type) {
                ticket_type.remaining = 0;
            }
        }
        Ok(Arc::new(fresher))
    }

    /// Drop the event's entry: its organizer changed it through this
    /// instance and expects to see the change at once (other instances
    /// show it within [`FRESH_FOR`]).
    pub async fn forget(&self, event_id: EventId) {
        self.entries.invalidate(&event_id).await;
    }
}

impl EventCache {
    /// Drop the entry of the event this ticket type belongs to (tickets came
    /// back through this instance: a cancellation). Cancellations are rare
    /// next to page views, so a scan of the entries is fine.
    pub async fn forget_ticket_type(&self, ticket_type_id: TicketTypeId) {
        let holding: Vec<EventId> = self
            .entries
            .iter()
            .filter(|(_, detail)| {
                detail
                    .as_ref()
                    .is_some_and(|d| d.ticket_types.iter().any(|t| t.id == ticket_type_id))
            })
            .map(|(event_id, _)| *event_id)
            .collect();
        for event_id in holding {
            self.entries.invalidate(&event_id).await;
        }
    }
}

impl Default for EventCache {
    fn default() -> Self {
        Self::new()
    }
}
