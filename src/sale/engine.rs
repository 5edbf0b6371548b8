//! Stage 5, the engine: Postgres sells, and has the last word. The default
//! strategy is the batch engine ([`super::batch`]: group commit per ticket
//! type); the others are baselines kept for comparison
//! ([`super::baselines`]). Each ends in the same conditional
//! `UPDATE ticket_types SET remaining = remaining - $n WHERE id = $1 AND
//! remaining - $n >= 0`, inside the transaction that writes the orders.

use time::OffsetDateTime;

use super::{
    baselines::Baseline, batch::OnTheWay, outcome::Purchase, request::PurchaseRequest, sales::Sales,
};
use crate::error::AppError;

impl Sales {
    /// The strategy's sale, Postgres having the last word; `on_its_way`:
    /// the engine's token for a purchase through the gate.
    pub(super) async fn sell(
        &self,
        now: OffsetDateTime,
        request: &PurchaseRequest,
        on_its_way: Option<OnTheWay>,
    ) -> Result<Purchase, AppError> {
        let result = match Baseline::of(self.strategy) {
            None => match on_its_way {
                Some(on_its_way) => {
                    self.batcher
                        .purchase_on_its_way(now, request, on_its_way)
                        .await
                }
                None => self.batcher.purchase(now, request).await,
            },
            Some(baseline) => {
                baseline
                    .purchase(&self.db, &self.holding, self.redis.as_ref(), now, request)
                    .await
            }
        };
        if matches!(result, Err(AppError::SoldOut)) {
            self.sold_out.set(request.ticket_type_id);
        }
        result
    }
}
