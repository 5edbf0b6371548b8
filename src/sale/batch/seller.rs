//! Answering a batch: its replay-only jobs from one read, its late ones
//! refused, the rest sold in one transaction ([`super::transaction`]), and
//! each job of a batch that failed for a reason of its own sold alone
//! ([`crate::sale::single`]).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use sqlx::PgPool;
use tracing::Instrument;

use super::{
    intake::Intake,
    job::Job,
    rows::{existing_orders, order_key},
    transaction::{past_deadline, sell_batch},
};
use crate::{
    domain::TicketTypeId,
    error::AppError,
    sale::{
        holds::Holding,
        outcome::Purchase,
        replay::replay,
        round_trips::postgres_round,
        single::{self, Locking},
        sold_out::SoldOut,
    },
};

/// What sells the batches a worker takes.
pub(super) struct Seller {
    pub(super) db: PgPool,
    pub(super) sold_out: Arc<SoldOut>,
    pub(super) holding: Holding,
    /// How long a batch opened ahead may last: it has no purchase yet, so
    /// no buyer's deadline ([`super::EngineSettings::deadline`]).
    pub(super) deadline: Duration,
}

impl Seller {
    /// Sell `jobs` in one transaction, and with them what `intake` has by
    /// the time the row is locked.
    pub(super) async fn sell_taking(
        &self,
        ticket_type_id: TicketTypeId,
        jobs: Vec<Job>,
        intake: Option<&mut Intake>,
    ) {
        let (replays, jobs): (Vec<Job>, Vec<Job>) = jobs.into_iter().partition(|j| j.replay_only);
        if !replays.is_empty() {
            self.replay_or_refuse(replays).await;
        }
        let now = Instant::now();
        let (late, mut jobs): (Vec<Job>, Vec<Job>) =
            jobs.into_iter().partition(|j| j.deadline <= now);
        for job in late {
            let _ = job.reply.send(Err(AppError::Overloaded));
        }
        // A batch opened ahead has none yet: those that join have later
        // deadlines than this.
        let opened_ahead = intake.as_ref().is_some_and(|i| i.ahead.is_some());
        let Some(deadline) = jobs
            .iter()
            .map(|j| j.deadline)
            .min()
            .or_else(|| opened_ahead.then(|| now + self.deadline))
        else {
            return;
        };
        let span = tracing::info_span!(
            "purchase_batch",
            %ticket_type_id,
            size = jobs.len(),
            sold = tracing::field::Empty,
        );
        async {
            let answers = match sell_batch(
                &self.db,
                &self.holding,
                ticket_type_id,
                &mut jobs,
                deadline,
                intake,
            )
            .await
            {
                Ok(sold) => {
                    tracing::Span::current().record("sold", sold.sold);
                    if sold.remaining == Some(0) {
                        self.sold_out.set(ticket_type_id);
                    }
                    sold.answers
                }
                Err(err) if matches!(err, AppError::Overloaded) || past_deadline(&err) => jobs
                    .iter()
                    .map(|_| Some(Err(AppError::Overloaded)))
                    .collect(),
                Err(err) => {
                    tracing::warn!(error = %err, "batch failed; selling its requests one by one");
                    jobs.iter().map(|_| None).collect()
                }
            };
            for (job, answer) in jobs.into_iter().zip(answers) {
                let answer = match answer {
                    Some(answer) => answer,
                    None => self.alone(&job).await,
                };
                // The buyer may have gone; the order stands either way.
                let _ = job.reply.send(answer);
            }
        }
        .instrument(span)
        .await;
    }

    /// Jobs of a ticket type known sold out: one read for all their keys.
    async fn replay_or_refuse(&self, jobs: Vec<Job>) {
        let emails: Vec<&str> = jobs.iter().map(|j| j.request.email.as_str()).collect();
        let keys: Vec<&str> = jobs
            .iter()
            .map(|j| j.request.idempotency_key.as_str())
            .collect();
        postgres_round("replay");
        match existing_orders(&self.db, &emails, &keys).await {
            Ok(existing) => {
                for job in jobs {
                    let answer = match existing.get(&order_key(&job.request)) {
                        Some(order) => replay(order.clone(), &job.request),
                        None => Err(AppError::SoldOut),
                    };
                    let _ = job.reply.send(answer);
                }
            }
            Err(err) => {
                // Every one of them is told to come back in a moment.
                tracing::warn!(error = %err, "replay read failed");
                for job in jobs {
                    let _ = job.reply.send(Err(AppError::Overloaded));
                }
            }
        }
    }

    /// A request the batch could not answer, sold on its own.
    async fn alone(&self, job: &Job) -> Result<Purchase, AppError> {
        if job.deadline <= Instant::now() {
            return Err(AppError::Overloaded);
        }
        let result = single::purchase(
            &self.db,
            &self.holding,
            job.now,
            &job.request,
            Locking::RowLockFirst,
        )
        .await;
        if matches!(result, Err(AppError::SoldOut)) {
            self.sold_out.set(job.request.ticket_type_id);
        }
        result
    }
}
