//! Domain types and rules, without I/O: every value from a form or an API
//! body is parsed into one of these before anything touches the database (a
//! parse error names its field); ids, statuses, the sale window, and the
//! arithmetic of the dashboard's search, pages and chart.

mod buyer_key;
mod checkin;
mod client_key;
mod confirm;
mod email;
mod event;
mod format;
mod idempotency;
mod ids;
mod listing;
mod mail_domain;
mod money;
mod order_search;
mod organizer_api;
mod paging;
mod presale;
mod public_address;
mod quantity;
mod sale_window;
mod sales_chart;
mod status;
mod text;
mod webhook;
mod zone;

pub use buyer_key::{BuyerKey, BuyerLimits, LimitBreach};
pub use checkin::{
    CHECK_INS_PER_PAGE, CheckInCursor, CheckInResult, DoorName, DoorSecret, DoorWindow,
    MAX_CHECK_INS_PER_PAGE, MIN_PREFIX_CHARS, ScanNonce, TicketCode, page_limit,
};
pub use client_key::ClientKey;
pub use confirm::{ConfirmKey, ConfirmToken, MIN_CONFIRM_KEY_CHARS};
pub use email::Email;
pub use event::{
    DEFAULT_HOLD_MINUTES, DEFAULT_PAY_MINUTES, EventInput, MAX_HOLD_MINUTES, MAX_PAY_MINUTES,
    MAX_TICKET_TYPES, MIN_PAY_MINUTES, NewEvent, NewTicketType, TicketTypeInput, hold_minutes_text,
    payment_text,
};
pub use format::{decimal_price, format_price, format_time};
pub use idempotency::{CancelSecret, IdempotencyKey, MAX_KEY_CHARS, MIN_KEY_CHARS};
pub use ids::{
    ApiTokenId, DeliveryId, DoorLinkId, EventId, OrderId, OrganizerId, QueueEntryId, TicketTypeId,
    WaitlistEntryId, WebhookId,
};
pub use listing::{EVENTS_PER_PAGE, EventCursor, Quotas};
pub use money::{Currency, Money};
pub use order_search::{
    MAX_QUERY_CHARS, ORDERS_PER_PAGE, OrderSearch, contains_pattern, normalise_query, page_count,
};
pub use organizer_api::{
    DEFAULT_EVENTS_LIMIT, DEFAULT_ORDERS_LIMIT, EventListQuery, MAX_ORDERS_LIMIT,
    MAX_SALES_MINUTES, OrderCursor, OrderQuery, SalesRange,
};
pub use paging::{CodeCursor, CodeQuery, DEFAULT_PAGE_LIMIT, EntryCursor, EntryQuery, PageQuery};
pub use presale::{
    CodeInput, MAX_CODE_USES, MAX_CODES_PER_BATCH, NewCodes, PresaleCode, code_is_current,
    is_guessable, optional_code,
};
pub use public_address::is_public;
pub use quantity::{MAX_QUANTITY, Quantity};
pub use sale_window::{SaleState, SaleWindow};
pub use sales_chart::{Bucket, MAX_CHART_POINTS, SalesChart, SalesPoint};
pub use status::{EventStatus, OrderStatus, WaitlistStatus};
pub use text::{Lines, refuse_control};
pub use webhook::{
    MAX_WEBHOOK_DESCRIPTION_CHARS, MAX_WEBHOOK_ENDPOINTS, MAX_WEBHOOK_URL_CHARS, RetrySchedule,
    WEBHOOK_EVENT_TYPES, WebhookUrl, parse_event_types, parse_webhook_description,
};
pub use zone::Zone;

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
