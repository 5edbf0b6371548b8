//! One purchase queued for its ticket type's worker, with where its
//! answer goes.

use std::time::Instant;

use time::OffsetDateTime;
use tokio::sync::oneshot;

use crate::{
    domain::BuyerKey,
    error::AppError,
    sale::{outcome::Purchase, request::PurchaseRequest},
};

/// Where a job's answer goes.
pub(super) type Reply = oneshot::Sender<Result<Purchase, AppError>>;

pub(super) struct Job {
    pub(super) now: OffsetDateTime,
    pub(super) request: PurchaseRequest,
    /// The ticket type is known sold out: only replay an earlier order of
    /// this key, or refuse.
    pub(super) replay_only: bool,
    /// The buyer's limit key, folded on the buyer's own task rather than
    /// under the row lock (the fold is the costliest step of `decide`);
    /// `None` for replay-only jobs, which never need it.
    pub(super) buyer: Option<BuyerKey>,
    /// Not sold by then: refused, never written.
    pub(super) deadline: Instant,
    pub(super) reply: Reply,
}
