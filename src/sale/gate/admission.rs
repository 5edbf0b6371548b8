//! The gate's answer to one purchase ([`Admission`]): checked and counted
//! in Redis by one script, and afterwards settled (Postgres sold it) or
//! given back (it did not).

use std::{sync::atomic::Ordering, time::Instant};

use super::{
    local::{QUIET_RETRY, Rebuild, Rebuilt},
    settings::GateError,
    state::{Gate, unix_ms},
};
use crate::{domain::BuyerKey, error::AppError, sale::request::PurchaseRequest};

/// The gate's answer to one purchase.
#[derive(Debug)]
pub(in crate::sale) enum Admission {
    /// Counted in Redis: on to Postgres, and [`Gate::give_back`] unless it sells.
    Admitted(Ticket),
    /// The key was admitted before: on to Postgres (which replays the
    /// order, or sells if the first attempt failed), not counted again.
    Replay,
    /// Refused from Redis. `holds`: the buyer holds tickets of this type,
    /// so this may be the retry of a committed purchase (worth a replay read).
    Refused { refusal: AppError, holds: bool },
    /// No answer (Redis down or slow, the ticket type unknown): Postgres alone.
    Bypass,
}

/// What an admission counted, to settle it or give it back.
#[derive(Debug)]
pub(in crate::sale) struct Ticket {
    stock: String,
    record: String,
    inflight: String,
    value: String,
    generation: String,
    quantity: i32,
    buyer: String,
}

impl Gate {
    /// Check and count one purchase in Redis.
    pub(in crate::sale) async fn admit(&self, request: &PurchaseRequest) -> Admission {
        let id = request.ticket_type_id;
        let before = {
            let mut local = self.local();
            let now = Instant::now();
            if local.down_until.is_some_and(|until| now < until) {
                drop(local);
                return outcome(Admission::Bypass, "fallback");
            }
            local.seen.insert(id, now);
            match local.stale.get(&id).copied() {
                // Redis may be high (back from a failure): rebuilt first.
                Some(Rebuild::Always) => Some(Rebuild::Always),
                // A quiet rebuild that finds purchases in flight leaves the
                // hash as it is (at most low) and the purchase is admitted
                // against it. One purchase tries per QUIET_RETRY, not every
                // purchase of the burst (the reconciler retries too).
                Some(mode) => {
                    let due = local.busy_until.get(&id).is_none_or(|until| now >= *until);
                    if due {
                        local.busy_until.insert(id, now + QUIET_RETRY);
                    }
                    due.then_some(mode)
                }
                // The first purchases of a type this instance never built:
                // one builds the hash if it is missing while the others wait
                // for it, so that a burst's first wave asks Redis once each,
                // not twice (once to find the hash missing, once after).
                None => (!local.rebuilt.contains_key(&id)).then_some(Rebuild::IfMissing),
            }
        };
        let answer = async {
            if let Some(mode) = before
                && self.rebuild_once(id, mode).await? == Rebuilt::Unknown
            {
                return Ok(None);
            }
            // A missing hash is rebuilt, then asked again (once).
            for _ in 0..2 {
                match self.try_admit(request).await? {
                    Some(admission) => return Ok(Some(admission)),
                    None => {
                        if self.rebuild_once(id, Rebuild::IfMissing).await? == Rebuilt::Unknown {
                            return Ok(None);
                        }
                    }
                }
            }
            Ok::<_, GateError>(None)
        }
        .await;
        match answer {
            Ok(Some(admission)) => {
                self.answered();
                let label = match &admission {
                    Admission::Admitted(_) => {
                        self.admitted.fetch_add(1, Ordering::Relaxed);
                        "admitted"
                    }
                    Admission::Replay => "replay",
                    Admission::Refused {
                        refusal: AppError::OrderLimit { .. },
                        ..
                    } => "order_limit",
                    Admission::Refused {
                        refusal: AppError::BuyerLimit { .. },
                        ..
                    } => "limit",
                    Admission::Refused { .. } => "sold_out",
                    Admission::Bypass => "fallback",
                };
                outcome(admission, label)
            }
            // The ticket type is not in Postgres: Postgres answers.
            Ok(None) => outcome(Admission::Bypass, "unknown"),
            Err(err) => {
                self.failed(&err);
                outcome(Admission::Bypass, "fallback")
            }
        }
    }

    /// For a ticket type this instance knows sold out: whether the request
    /// may be the retry of a committed purchase (worth a replay read in
    /// Postgres). Counts nothing. `true` when Redis cannot tell.
    pub(in crate::sale) async fn may_replay(&self, request: &PurchaseRequest) -> bool {
        if self.standing_aside() {
            return true;
        }
        let mut invocation = self.may_replay.prepare_invoke();
        invocation
            .key(self.stock_key(request.ticket_type_id))
            .key(self.record_key(request))
            .arg(format!("b:{}", BuyerKey::from(&request.email)));
        let answer: Result<i64, GateError> = self
            .redis(self.settings.timeout, async |conn| {
                invocation.invoke_async(conn).await
            })
            .await;
        match answer {
            Ok(0) => {
                self.answered();
                metrics::counter!("stampede_gate_total", "outcome" => "sold_out_known")
                    .increment(1);
                false
            }
            Ok(_) => true,
            Err(err) => {
                self.failed(&err);
                true
            }
        }
    }

    /// `None`: the stock hash is missing (to rebuild).
    async fn try_admit(&self, request: &PurchaseRequest) -> Result<Option<Admission>, GateError> {
        let stock = self.stock_key(request.ticket_type_id);
        let record = self.record_key(request);
        let inflight = self.inflight_key(request.ticket_type_id);
        let buyer = format!("b:{}", BuyerKey::from(&request.email));
        let quantity = request.quantity.get();
        let ttl = self.settings.record_ttl.as_secs().max(1);
        let mut invocation = self.admit.prepare_invoke();
        invocation
            .key(&stock)
            .key(&record)
            .key(&inflight)
            .arg(&buyer)
            .arg(quantity)
            .arg(ttl)
            .arg(unix_ms());
        let (verdict, number, held, generation): (String, i64, i64, String) = self
            .redis(self.settings.timeout, async |conn| {
                invocation.invoke_async(conn).await
            })
            .await?;
        let number = i32::try_from(number).unwrap_or(i32::MAX);
        let holds = held > 0;
        Ok(Some(match verdict.as_str() {
            "rebuild" => return Ok(None),
            "replay" => Admission::Replay,
            "order_limit" => Admission::Refused {
                refusal: AppError::OrderLimit { max: number },
                holds,
            },
            "limit" => Admission::Refused {
                refusal: AppError::BuyerLimit { max: number },
                holds,
            },
            "sold_out" if number > 0 => Admission::Refused {
                refusal: AppError::NotEnoughLeft { remaining: number },
                holds,
            },
            "sold_out" => Admission::Refused {
                refusal: AppError::SoldOut,
                holds,
            },
            "admitted" => Admission::Admitted(Ticket {
                value: format!("{generation}:{quantity}:{buyer}"),
                stock,
                record,
                inflight,
                generation,
                quantity,
                buyer,
            }),
            other => return Err(GateError::Answer(other.to_owned())),
        }))
    }

    /// Postgres did not sell an admitted purchase: its counts go back, once.
    pub(in crate::sale) async fn give_back(&self, ticket: &Ticket) {
        let mut invocation = self.give_back.prepare_invoke();
        invocation
            .key(&ticket.stock)
            .key(&ticket.record)
            .key(&ticket.inflight)
            .arg(&ticket.value)
            .arg(&ticket.generation)
            .arg(ticket.quantity)
            .arg(&ticket.buyer);
        let done: Result<i64, GateError> = self
            .redis(self.settings.timeout, async |conn| {
                invocation.invoke_async(conn).await
            })
            .await;
        let label = match done {
            Ok(2) => "given_back",
            Ok(1) => "older_generation",
            Ok(_) => "nothing",
            Err(err) => {
                // Redis stays low by this purchase until the next rebuild.
                self.failed(&err);
                "failed"
            }
        };
        metrics::counter!("stampede_gate_give_backs_total", "outcome" => label).increment(1);
    }

    /// Postgres sold an admitted purchase: it is no longer in flight. Off
    /// the buyer's answer; if it is lost, the admission holds back the
    /// quiet rebuilds for `settle_within`.
    pub(in crate::sale) async fn settle(&self, ticket: &Ticket) {
        let mut settle = redis::cmd("ZREM");
        settle.arg(&ticket.inflight).arg(&ticket.record);
        let done: Result<i64, GateError> = self
            .redis(self.settings.timeout, async |conn| {
                settle.query_async(conn).await
            })
            .await;
        let label = match done {
            Ok(_) => "settled",
            Err(err) => {
                self.failed(&err);
                "failed"
            }
        };
        metrics::counter!("stampede_gate_settles_total", "outcome" => label).increment(1);
    }
}

fn outcome(admission: Admission, label: &'static str) -> Admission {
    metrics::counter!("stampede_gate_total", "outcome" => label).increment(1);
    admission
}
