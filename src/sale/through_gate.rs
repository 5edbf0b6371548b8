//! Stage 4, the gate: with `--redis-gate`, each purchase is checked and
//! counted in Redis ([`super::gate`]) before the engine. Refusals are
//! answered from Redis; admitted purchases go on to the engine (Postgres
//! keeps the last word) and give their counts back if it does not sell
//! them. Without a gate, purchases go straight to the engine.

use std::sync::Arc;

use time::OffsetDateTime;
use tracing::Instrument;

use super::{
    gate::Admission, outcome::Purchase, replay::replay_by_key, request::PurchaseRequest,
    sales::Sales, strategy::Strategy,
};
use crate::error::AppError;

impl Sales {
    /// Through the Redis gate, if there is one, then the strategy's sale.
    pub(super) async fn gate_then_sell(
        &self,
        now: OffsetDateTime,
        request: &PurchaseRequest,
    ) -> Result<Purchase, AppError> {
        let Some(gate) = &self.gate else {
            return self.sell(now, request, None).await;
        };
        // The engine may begin the transaction that sells it while Redis
        // answers ([`super::batch::OnTheWay`]).
        let on_its_way = (self.strategy == Strategy::Batch).then(|| {
            self.batcher
                .on_its_way(request.ticket_type_id, gate.call_timeout())
        });
        let mut admission = gate.admit(request).await;
        // A refusal is not on its way (and the sale it waits for below must
        // not wait for it); "sold out" tells a batch opened ahead that no
        // more of the wave are coming.
        let on_its_way = match (&admission, on_its_way) {
            (Admission::Refused { refusal, .. }, Some(on_its_way)) => {
                if matches!(refusal, AppError::SoldOut) {
                    on_its_way.sold_out();
                }
                None
            }
            (_, on_its_way) => on_its_way,
        };
        // A sold-out answer while this instance's admitted purchases are
        // still being decided waits for them; if one was given back, the
        // purchase asks again (once).
        if let Admission::Refused {
            refusal: AppError::SoldOut,
            ..
        } = admission
            && gate.settled(request.ticket_type_id).await
        {
            admission = gate.admit(request).await;
        }
        match admission {
            Admission::Bypass | Admission::Replay => self.sell(now, request, on_its_way).await,
            // Refused from Redis; a buyer who holds tickets may be retrying
            // a committed purchase, which replays.
            Admission::Refused { refusal, holds } => {
                if matches!(refusal, AppError::SoldOut) {
                    // Redis has none left; once Postgres agrees, this
                    // instance refuses the type without asking Redis.
                    self.sold_out.suspect(request.ticket_type_id);
                }
                if !holds {
                    return Err(refusal);
                }
                match replay_by_key(&self.db, request).await {
                    Err(AppError::NotFound) => Err(refusal),
                    answer => answer,
                }
            }
            Admission::Admitted(ticket) => {
                // In a task of its own, so that a buyer who goes away
                // cannot cancel the give-back.
                let sales = self.clone();
                let in_flight = gate.in_flight(request.ticket_type_id);
                let gate = Arc::clone(gate);
                let request = request.clone();
                let sold = tokio::spawn(
                    async move {
                        let result = sales.sell(now, &request, on_its_way).await;
                        if matches!(result, Ok(Purchase::Created { .. })) {
                            drop(in_flight);
                            // Off the buyer's answer: no longer in flight.
                            tokio::spawn(
                                async move { gate.settle(&ticket).await }.in_current_span(),
                            );
                        } else {
                            gate.give_back(&ticket).await;
                            // Worth asking again only if Postgres has the
                            // ticket: not after a replay (the order stands)
                            // or a refusal for want of stock (Redis was high).
                            if let Err(refusal) = &result
                                && !matches!(
                                    refusal,
                                    AppError::SoldOut | AppError::NotEnoughLeft { .. }
                                )
                            {
                                in_flight.given_back();
                            }
                        }
                        result
                    }
                    .in_current_span(),
                );
                sold.await.unwrap_or_else(|err| {
                    Err(AppError::internal(anyhow::anyhow!(
                        "purchase task failed: {err}"
                    )))
                })
            }
        }
    }
}
