//! Domain types: every value from a form or an API body is parsed into one of
//! these before anything touches the database. A parse error names its field.

mod email;
mod event;
mod idempotency;
mod money;
mod quantity;

pub use email::Email;
pub use event::{
    EventInput, EventStatus, MAX_TICKET_TYPES, NewEvent, NewTicketType, TicketTypeInput,
};
pub use idempotency::IdempotencyKey;
pub use money::{Currency, Money, decimal_price, format_price};
pub use quantity::{MAX_QUANTITY, Quantity};

/// One invalid input field: which one, and a sentence a person can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct InvalidField {
    pub field: String,
    pub message: String,
}

impl InvalidField {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Attach a field name to a message-only parse error.
pub trait ForField<T> {
    fn for_field(self, field: &str) -> Result<T, InvalidField>;
}

impl<T> ForField<T> for Result<T, String> {
    fn for_field(self, field: &str) -> Result<T, InvalidField> {
        self.map_err(|message| InvalidField::new(field, message))
    }
}
