//! One error type for the whole app, and its tables: HTTP status, stable
//! code, the field it concerns, and named Postgres constraints mapped to the
//! 4xx a person should see. Rendering (HTML page or JSON body) is the web
//! layer's job (`web::error`); nothing here depends on HTTP frameworks.

use http::StatusCode;
use time::OffsetDateTime;

use crate::domain::{InvalidField, LimitBreach, format_time};

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("{}", .0.message)]
    Invalid(#[from] InvalidField),
    #[error("{0}")]
    BadRequest(String),
    #[error("We could not find that.")]
    NotFound,
    #[error("Log in, or send a valid API token as `Authorization: Bearer <token>`.")]
    Unauthorized,
    #[error("{0}")]
    Forbidden(&'static str),
    #[error("Too many attempts; wait {retry_after_secs} seconds and try again.")]
    TooManyRequests { retry_after_secs: u64 },
    #[error("Sold out: there are no tickets of this type left.")]
    SoldOut,
    #[error("Only {remaining} left of this ticket type; choose fewer.")]
    NotEnoughLeft { remaining: i32 },
    #[error("At most {max} tickets of this type fit in one order.")]
    OrderLimit { max: i32 },
    // Says nothing of what this email already holds: anyone can type any email.
    #[error(
        "Each buyer may hold at most {max} tickets of this type; this purchase would go beyond that."
    )]
    BuyerLimit { max: i32 },
    #[error(
        "Each buyer may hold at most {max} tickets for this event, across its ticket types; this purchase would go beyond that."
    )]
    EventBuyerLimit { max: i32 },
    #[error("The sale has not opened yet; it opens at {}.", format_time(*.opens_at))]
    SaleNotOpen { opens_at: OffsetDateTime },
    #[error("{0}")]
    SaleClosed(&'static str),
    #[error("This idempotency key was already used for a different purchase.")]
    IdempotencyConflict,
    #[error("This scan nonce was already used for another ticket code; send a new one per scan.")]
    NonceReused,
    #[error("This order is already cancelled.")]
    AlreadyCancelled,
    #[error("The event has started; its orders can no longer be cancelled.")]
    EventStarted,
    // Held orders (src/sale/holds.rs).
    #[error(
        "This order's hold has expired: its tickets went back on sale. You can try to buy them again."
    )]
    HoldExpired,
    #[error("This order is not waiting for a confirmation.")]
    NotHeld,
    #[error("This order is not confirmed: it has no tickets to send.")]
    NotConfirmed,
    // Says nothing of which orders: anyone behind the address could read it.
    #[error(
        "Your network address already holds {max} unconfirmed tickets for this event: confirm those orders from their mails first, or wait until their holds end."
    )]
    UnconfirmedHoldLimit { max: i32 },
    // Waiting lists (src/db/waitlist/).
    #[error("Tickets of this type are on sale: buy them instead of joining its waiting list.")]
    NotSoldOut,
    // Presale codes: uses are counted in tickets.
    #[error("This presale code has {left} uses left; choose fewer tickets or another code.")]
    CodeUsedUp { left: i32 },
    #[error(
        "{sold} tickets of this type are sold (or were, and were cancelled); a ticket type can be deleted only while none is."
    )]
    TicketTypeSold { sold: i64 },
    #[error("The event is cancelled; it can no longer be changed.")]
    EventCancelled,
    #[error("This is the event's last ticket type; an event needs at least one.")]
    LastTicketType,
    #[error("That method is not allowed here.")]
    MethodNotAllowed,
    #[error("The request body is too large.")]
    PayloadTooLarge,
    #[error("The request body arrived too slowly; please try again.")]
    RequestTimeout,
    #[error("Stampede is very busy right now; please try again in a moment.")]
    Overloaded,
    // Paid tickets (src/payments): Stripe did not answer, or is not connected.
    #[error("Payment is not available right now; please try again in a moment.")]
    PaymentUnavailable,
    #[error("This webhook's signature is not valid.")]
    BadSignature,
    // The waiting room (src/waiting_room): purchases of a queued event need a pass.
    #[error("This event has a waiting room: join the queue, and buy once you are let in.")]
    PassRequired,
    #[error("Your turn to buy has expired; join the queue again.")]
    PassExpired,
    #[error("This pass is not valid for this event; join the queue for it.")]
    PassInvalid,
    #[error("This pass was already used for an order; each turn in the queue buys once.")]
    PassSpent,
    #[error("At most {max} places in this queue per network address.")]
    TooManyEntries { max: u32 },
    // The proof of work at the queue's door (src/waiting_room/proof.rs).
    #[error(
        "Joining this queue needs a solved challenge (a small puzzle your browser solves with JavaScript); send it as `proof`."
    )]
    ProofRequired,
    #[error("This challenge has expired; get a new one and solve it again.")]
    ProofExpired,
    #[error("This proof does not solve a challenge of this queue.")]
    ProofInvalid,
    #[error("This solved challenge was already used to join; each one joins once.")]
    ProofReused,
    #[error("Something went wrong on our side; please try again.")]
    Internal(#[source] anyhow::Error),
}

impl AppError {
    /// A presale code that does not unlock the ticket type, or not now.
    pub fn code_not_valid() -> Self {
        Self::Invalid(InvalidField::new(
            "presale_code",
            "This presale code does not unlock this ticket type, is used up, or is not valid at this time.",
        ))
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Self::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::SoldOut
            | Self::NotEnoughLeft { .. }
            | Self::OrderLimit { .. }
            | Self::BuyerLimit { .. }
            | Self::EventBuyerLimit { .. }
            | Self::IdempotencyConflict
            | Self::NonceReused
            | Self::AlreadyCancelled
            | Self::EventStarted
            | Self::NotHeld
            | Self::NotConfirmed
            | Self::NotSoldOut
            | Self::CodeUsedUp { .. }
            | Self::TicketTypeSold { .. }
            | Self::LastTicketType
            | Self::EventCancelled => StatusCode::CONFLICT,
            Self::SaleNotOpen { .. } | Self::SaleClosed(_) => StatusCode::FORBIDDEN,
            Self::HoldExpired => StatusCode::GONE,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Self::Overloaded | Self::PaymentUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::BadSignature => StatusCode::BAD_REQUEST,
            Self::PassRequired | Self::PassExpired | Self::PassInvalid | Self::PassSpent => {
                StatusCode::FORBIDDEN
            }
            Self::TooManyEntries { .. } | Self::UnconfirmedHoldLimit { .. } => {
                StatusCode::TOO_MANY_REQUESTS
            }
            Self::ProofRequired | Self::ProofExpired | Self::ProofInvalid => StatusCode::FORBIDDEN,
            Self::ProofReused => StatusCode::CONFLICT,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Stable machine-readable code for API clients.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Invalid(_) | Self::BadRequest(_) => "invalid",
            Self::NotFound => "not_found",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden(_) => "forbidden",
            Self::TooManyRequests { .. } => "rate_limited",
            Self::SoldOut => "sold_out",
            Self::NotEnoughLeft { .. } => "not_enough_left",
            Self::OrderLimit { .. } | Self::BuyerLimit { .. } | Self::EventBuyerLimit { .. } => {
                "limit_exceeded"
            }
            Self::SaleNotOpen { .. } => "sale_not_open",
            Self::SaleClosed(_) => "sale_closed",
            Self::IdempotencyConflict => "idempotency_conflict",
            Self::NonceReused => "nonce_conflict",
            Self::AlreadyCancelled => "already_cancelled",
            Self::EventStarted => "event_started",
            Self::HoldExpired => "hold_expired",
            Self::NotHeld => "not_held",
            Self::NotConfirmed => "not_confirmed",
            Self::UnconfirmedHoldLimit { .. } => "unconfirmed_hold_limit",
            Self::NotSoldOut => "not_sold_out",
            Self::CodeUsedUp { .. } => "code_used_up",
            Self::TicketTypeSold { .. } => "ticket_type_sold",
            Self::LastTicketType => "last_ticket_type",
            Self::EventCancelled => "event_cancelled",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::PayloadTooLarge => "payload_too_large",
            Self::RequestTimeout => "request_timeout",
            Self::Overloaded => "overloaded",
            Self::PaymentUnavailable => "payment_unavailable",
            Self::BadSignature => "bad_signature",
            Self::PassRequired => "pass_required",
            Self::PassExpired => "pass_expired",
            Self::PassInvalid => "pass_invalid",
            Self::PassSpent => "pass_spent",
            Self::TooManyEntries { .. } => "queue_entries_limit",
            Self::ProofRequired => "proof_required",
            Self::ProofExpired => "proof_expired",
            Self::ProofInvalid => "proof_invalid",
            Self::ProofReused => "proof_reused",
            Self::Internal(_) => "internal",
        }
    }

    /// The input field the error is about, if any.
    pub fn field(&self) -> Option<&str> {
        match self {
            Self::Invalid(f) => Some(&f.field),
            Self::NotEnoughLeft { .. }
            | Self::OrderLimit { .. }
            | Self::BuyerLimit { .. }
            | Self::EventBuyerLimit { .. }
            | Self::UnconfirmedHoldLimit { .. } => Some("quantity"),
            Self::IdempotencyConflict => Some("idempotency_key"),
            Self::CodeUsedUp { .. } => Some("presale_code"),
            Self::NonceReused => Some("nonce"),
            Self::ProofRequired | Self::ProofExpired | Self::ProofInvalid | Self::ProofReused => {
                Some("proof")
            }
            _ => None,
        }
    }

    /// Postgres chose this transaction as a deadlock's victim (40P01): it
    /// rolled back whole, and running it again is safe.
    pub fn is_deadlock(&self) -> bool {
        match self {
            Self::Internal(err) => err
                .downcast_ref::<sqlx::Error>()
                .and_then(|err| err.as_database_error())
                .and_then(|db| db.code())
                .is_some_and(|code| code == "40P01"),
            _ => false,
        }
    }

    pub fn internal(err: impl Into<anyhow::Error>) -> Self {
        Self::Internal(err.into())
    }
}

impl From<LimitBreach> for AppError {
    fn from(breach: LimitBreach) -> Self {
        match breach {
            LimitBreach::TicketType { max } => Self::BuyerLimit { max },
            LimitBreach::Event { max } => Self::EventBuyerLimit { max },
        }
    }
}

impl From<sqlx::Error> for AppError {
    fn from(err: sqlx::Error) -> Self {
        match &err {
            // The database is out of reach for now (pool exhausted, the
            // connection lost, the server shutting down or restarting): 503
            // with Retry-After, and a buyer retries with the same key, which
            // replays the order if its commit did go through.
            sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => {
                Self::Overloaded
            }
            sqlx::Error::Database(db)
                if db
                    .code()
                    .is_some_and(|code| code.starts_with("08") || code.starts_with("57P")) =>
            {
                Self::Overloaded
            }
            sqlx::Error::Database(db) => match db.constraint().and_then(constraint_error) {
                Some(mapped) => mapped,
                None => Self::internal(err),
            },
            _ => Self::internal(err),
        }
    }
}

/// Named constraints from migrations/ mapped to the 4xx a person should see.
/// The sale path checks these conditions itself; this is the last line.
fn constraint_error(name: &str) -> Option<AppError> {
    let invalid =
        |field: &str, message: &str| Some(AppError::Invalid(InvalidField::new(field, message)));
    match name {
        "ticket_types_remaining_non_negative" => Some(AppError::SoldOut),
        "orders_quantity_positive" => invalid("quantity", "Choose at least 1 ticket."),
        "orders_buyer_idempotency_key" => Some(AppError::IdempotencyConflict),
        "orders_ticket_type_id_fkey" => Some(AppError::NotFound),
        "orders_queue_entry_once" => Some(AppError::PassSpent),
        "queue_entries_proof_once" => Some(AppError::ProofReused),
        "waiting_rooms_prequeue_minutes_range" => invalid(
            "prequeue_minutes",
            "The pre-queue opens between 0 and 1440 minutes before the sale.",
        ),
        "waiting_rooms_admit_per_minute_positive" => {
            invalid("admit_per_minute", "Admit at least 1 buyer per minute.")
        }
        "waiting_rooms_max_active_positive" => {
            invalid("max_active", "The cap must be at least 1 buyer.")
        }
        "waiting_rooms_pass_minutes_range" => {
            invalid("pass_minutes", "A pass lasts between 1 and 1440 minutes.")
        }
        "waiting_rooms_admission_set" => invalid(
            "admit_per_minute",
            "Set a rate of admission, a cap on active buyers, or both.",
        ),
        "ticket_types_remaining_within_capacity" | "ticket_types_capacity_non_negative" => invalid(
            "capacity",
            "The capacity cannot go below the tickets already sold.",
        ),
        "ticket_types_buyer_limit_covers_order" => invalid(
            "max_per_buyer",
            "The limit per buyer cannot be below the limit per order.",
        ),
        "door_links_window_ordered" => {
            invalid("valid_until", "The link must stop working after it starts.")
        }
        "events_sale_window_ordered" => {
            invalid("sale_closes_at", "The sale must close after it opens.")
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_out_of_reach_is_503_and_other_failures_are_500() {
        let lost = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        for err in [
            sqlx::Error::PoolTimedOut,
            sqlx::Error::PoolClosed,
            sqlx::Error::Io(lost),
        ] {
            let mapped = AppError::from(err);
            assert_eq!(
                mapped.status(),
                StatusCode::SERVICE_UNAVAILABLE,
                "{mapped:?}"
            );
        }
        let other = AppError::from(sqlx::Error::Protocol("garbled".into()));
        assert_eq!(other.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
