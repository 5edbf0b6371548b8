//! Stage 3, the pass: the waiting room's door (`crate::waiting_room`),
//! before anything is written.

use time::OffsetDateTime;

use super::{request::PurchaseRequest, sales::Sales};
use crate::error::AppError;

impl Sales {
    /// The waiting room's door, before anything is written: for an event
    /// with its room on, a valid pass that no other purchase has spent
    /// (the request then names the entry, which the order records: its
    /// unique index is the last word). `None`: the request goes on as it is.
    pub(super) async fn check_pass(
        &self,
        now: OffsetDateTime,
        request: &PurchaseRequest,
    ) -> Result<Option<PurchaseRequest>, AppError> {
        let Some(event_id) = self
            .rooms
            .event_behind_room(&self.db, request.ticket_type_id)
            .await?
        else {
            // No room: nothing to spend, whatever the caller sent.
            return Ok(request.queue_entry.is_some().then(|| PurchaseRequest {
                queue_entry: None,
                ..request.clone()
            }));
        };
        let entry = self
            .rooms
            .key()
            .check_pass(event_id, request.pass.as_deref(), now)?;
        // The fast refusal of a spent pass; a retry of the purchase that
        // spent it (same buyer and key) goes on, and replays.
        let spender = sqlx::query!(
            "SELECT email, idempotency_key FROM orders WHERE queue_entry_id = $1",
            entry.get(),
        )
        .fetch_optional(&self.db)
        .await?;
        if let Some(spender) = spender
            && (spender.email != request.email.as_str()
                || spender.idempotency_key != request.idempotency_key.as_str())
        {
            return Err(AppError::PassSpent);
        }
        Ok(Some(PurchaseRequest {
            queue_entry: Some(entry),
            ..request.clone()
        }))
    }
}
