//! What a purchase asks for, already validated.

use crate::domain::{
    ClientKey, Email, EventId, IdempotencyKey, PresaleCode, Quantity, QueueEntryId, TicketTypeId,
};

/// A validated purchase: every field already parsed into its domain type.
#[derive(Debug, Clone)]
pub struct PurchaseRequest {
    /// Set when buying from an event's page: the ticket type must belong to it.
    pub event_id: Option<EventId>,
    pub ticket_type_id: TicketTypeId,
    pub quantity: Quantity,
    pub email: Email,
    pub idempotency_key: IdempotencyKey,
    /// The waiting room's pass as presented (cookie or API field), checked
    /// only when the ticket type's event has its room on.
    pub pass: Option<String>,
    /// The entry whose pass this purchase spends: set by
    /// [`Sales::purchase`](super::sales::Sales::purchase) from the checked pass
    /// (whatever the caller put here is replaced).
    pub queue_entry: Option<QueueEntryId>,
    /// The presale code the buyer gave: it must unlock the ticket type, be
    /// within its window and have uses left (checked in the transaction).
    /// A hidden ticket type is sold only with one.
    pub presale_code: Option<PresaleCode>,
    /// The buyer's network address, when the purchase came over the web: a
    /// hold for a mailbox not yet proven counts against it
    /// ([`HoldRules::per_address`](super::HoldRules::per_address)).
    pub client: Option<ClientKey>,
}
