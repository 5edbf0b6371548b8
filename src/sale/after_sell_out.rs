//! Stage 1's second half: a purchase of a ticket type this instance knows
//! sold out (its sold-out flag, [`super::sold_out`]) whose key may be that
//! of a committed purchase: its order replayed, or the refusal. Nothing is
//! sold here.

use time::OffsetDateTime;

use super::{
    outcome::Purchase, replay::replay_by_key, request::PurchaseRequest, sales::Sales,
    strategy::Strategy,
};
use crate::error::AppError;

impl Sales {
    /// A purchase of a type this instance knows sold out: the order of a
    /// committed purchase with this key, replayed, or [`AppError::SoldOut`].
    pub(super) async fn replay_after_sell_out(
        &self,
        now: OffsetDateTime,
        request: &PurchaseRequest,
    ) -> Result<Purchase, AppError> {
        // Until the flag knows the type's keys, the gate tells, without
        // counting, which requests cannot be the retry of a committed
        // purchase (their key never admitted, their buyer holding none), so
        // that only the others cost a read. The engine reads the keys of a
        // whole batch of them at once.
        if let Some(gate) = &self.gate
            && !gate.may_replay(request).await
        {
            return Err(AppError::SoldOut);
        }
        if self.strategy == Strategy::Batch {
            return self.batcher.replay_or_sold_out(now, request).await;
        }
        match replay_by_key(&self.db, request).await {
            Err(AppError::NotFound) => Err(AppError::SoldOut),
            answer => answer,
        }
    }
}
