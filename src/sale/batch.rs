//! The engine: group commit per ticket type.
//!
//! On one hot ticket type every purchase needs the same row, and a
//! transaction that holds it waits for its own commit; so the row carries
//! about one commit at a time however many buyers wait. Here concurrent
//! purchases of one ticket type queue in process, and one worker per ticket
//! type takes what has arrived (up to `max_batch`) and sells it in ONE
//! transaction:
//! 1. lock the ticket type row (`SELECT ... FOR UPDATE`): other batches, in
//!    this or another instance, and cancellations wait here;
//! 2. read the event in a statement of its own, so that it sees a change
//!    (unpublished, window closed) committed while we waited for the lock;
//!    the purchases queued meanwhile join the batch here (up to
//!    `max_batch`): under a burst the first purchase's batch waits for the
//!    row while the rest of the wave arrives, and they no longer wait for
//!    its commit to start a batch of their own;
//! 3. read the orders of the batch's idempotency keys and the holdings of
//!    its buyers, and decide each request in arrival order (first come
//!    first served; a request that does not fit is refused alone);
//! 4. write the orders, their tickets, the holdings and the stock in one
//!    statement whose stock `UPDATE ... WHERE remaining - total >= 0` and
//!    holdings upsert re-check the limits; anything unexpected rolls the
//!    batch back and each request runs alone ([`super::single`]);
//! 5. commit (durably: `synchronous_commit` stays on) and answer each.
//!
//! Behind the Redis gate, the first purchase of a wave has the worker open
//! its batch ahead, steps 1 and 2 while Redis answers ([`ahead`]).
//!
//! The queue is bounded: when it is full, a purchase gets 503 at once and
//! nothing is written.

use std::{
    collections::{HashMap, hash_map::Entry},
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use sqlx::PgPool;
use time::OffsetDateTime;
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

pub use self::ahead::OnTheWay;
use self::{
    ahead::{Ahead, asked_ahead},
    decide::{Decision, Rules, decide, order_key},
    intake::Intake,
    rows::{Locked, Written, codes, existing_orders, holdings, write},
};
use super::{
    outcome::Purchase,
    replay::replay,
    request::PurchaseRequest,
    round_trips::postgres_round,
    single::{self, Locking},
    sold_out::SoldOut,
};
use crate::{
    domain::{BuyerKey, BuyerLimits, ConfirmKey, EventStatus, SaleWindow, TicketTypeId},
    error::AppError,
};

#[derive(Debug, Clone, Copy)]
pub struct EngineSettings {
    /// Purchases sold in one transaction at most.
    pub max_batch: usize,
    /// Purchases waiting per ticket type at most; beyond, 503 at once.
    pub queue_capacity: usize,
    /// How long a sold-out flag stands without news from Postgres.
    pub sold_out_lifetime: Duration,
    /// A purchase not sold within this of its arrival is refused (503) and
    /// never written: the batch waits for the row and runs its statements
    /// under a lock and statement timeout that end by the earliest deadline
    /// in it. Keep it below the request timeout, so that no purchase commits
    /// after its buyer was told 503.
    pub deadline: Duration,
    /// A ticket type's worker without work for this long stops (a new one
    /// starts on demand).
    pub idle_worker: Duration,
}

impl Default for EngineSettings {
    fn default() -> Self {
        Self {
            max_batch: 512,
            queue_capacity: 4096,
            sold_out_lifetime: Duration::from_secs(2),
            deadline: Duration::from_secs(10),
            idle_worker: Duration::from_secs(30),
        }
    }
}

type Reply = oneshot::Sender<Result<Purchase, AppError>>;

struct Job {
    now: OffsetDateTime,
    request: PurchaseRequest,
    /// The ticket type is known sold out: only replay an earlier order of
    /// this key, or refuse.
    replay_only: bool,
    /// The buyer's limit key, folded on the buyer's own task rather than
    /// under the row lock (the fold is the costliest step of `decide`);
    /// `None` for replay-only jobs, which never need it.
    buyer: Option<BuyerKey>,
    /// Not sold by then: refused, never written.
    deadline: Instant,
    reply: Reply,
}

pub(super) struct Batcher {
    db: PgPool,
    settings: EngineSettings,
    sold_out: Arc<SoldOut>,
    confirm_key: ConfirmKey,
    queues: Mutex<HashMap<TicketTypeId, mpsc::Sender<Job>>>,
    /// Per ticket type, the purchases on their way through the gate
    /// ([`ahead`]); kept when an idle worker stops.
    aheads: Mutex<HashMap<TicketTypeId, Arc<Ahead>>>,
}

impl Batcher {
    pub fn new(
        db: PgPool,
        settings: EngineSettings,
        sold_out: Arc<SoldOut>,
        confirm_key: ConfirmKey,
    ) -> Self {
        Self {
            db,
            settings,
            sold_out,
            confirm_key,
            queues: Mutex::new(HashMap::new()),
            aheads: Mutex::new(HashMap::new()),
        }
    }

    pub fn settings(&self) -> EngineSettings {
        self.settings
    }

    /// Queue the purchase with the others of its ticket type; its answer.
    pub async fn purchase(
        self: &Arc<Self>,
        now: OffsetDateTime,
        request: &PurchaseRequest,
    ) -> Result<Purchase, AppError> {
        self.submit(now, request, false, None).await
    }

    /// For a ticket type known sold out: the buyer's earlier order for this
    /// key, replayed, or [`AppError::SoldOut`]. Queued like a purchase, so
    /// that one read answers a whole batch of them.
    pub async fn replay_or_sold_out(
        self: &Arc<Self>,
        now: OffsetDateTime,
        request: &PurchaseRequest,
    ) -> Result<Purchase, AppError> {
        self.submit(now, request, true, None).await
    }

    async fn submit(
        self: &Arc<Self>,
        now: OffsetDateTime,
        request: &PurchaseRequest,
        replay_only: bool,
        on_its_way: Option<OnTheWay>,
    ) -> Result<Purchase, AppError> {
        let (reply, answer) = oneshot::channel();
        let mut job = Job {
            now,
            request: request.clone(),
            replay_only,
            buyer: (!replay_only).then(|| BuyerKey::from(&request.email)),
            deadline: Instant::now() + self.settings.deadline,
            reply,
        };
        loop {
            let queue = self.queue(request.ticket_type_id);
            match queue.try_send(job) {
                Ok(()) => break,
                Err(mpsc::error::TrySendError::Full(_)) => return Err(AppError::Overloaded),
                // The worker stopped for idleness just now: start another.
                Err(mpsc::error::TrySendError::Closed(returned)) => job = returned,
            }
        }
        // Queued (or refused): a batch opened ahead no longer waits for it.
        drop(on_its_way);
        answer
            .await
            .unwrap_or_else(|_| Err(AppError::internal(anyhow::anyhow!("batch worker stopped"))))
    }

    /// The ticket type's queue, with a worker started if it has none.
    fn queue(self: &Arc<Self>, ticket_type_id: TicketTypeId) -> mpsc::Sender<Job> {
        let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(queue) = queues.get(&ticket_type_id).filter(|q| !q.is_closed()) {
            return queue.clone();
        }
        let (queue, jobs) = mpsc::channel(self.settings.queue_capacity);
        queues.insert(ticket_type_id, queue.clone());
        tokio::spawn(Arc::clone(self).work(ticket_type_id, jobs));
        queue
    }

    async fn work(self: Arc<Self>, ticket_type_id: TicketTypeId, jobs: mpsc::Receiver<Job>) {
        let max = self.settings.max_batch;
        let mut batch = Vec::with_capacity(max);
        let mut intake = Intake {
            jobs,
            carried: Vec::new(),
            max,
            ahead: None,
        };
        let mut ahead: Option<Arc<Ahead>> = None;
        loop {
            // Replays that came while the last batch ran first.
            batch.append(&mut intake.carried);
            if batch.is_empty() {
                if ahead.is_none() {
                    // Made by the first purchase on its way through the gate.
                    ahead = self
                        .aheads
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .get(&ticket_type_id)
                        .cloned();
                }
                let received = tokio::time::timeout(self.settings.idle_worker, async {
                    tokio::select! {
                        received = intake.jobs.recv_many(&mut batch, max) => received > 0,
                        () = asked_ahead(ahead.as_deref()) => true,
                    }
                })
                .await;
                if !matches!(received, Ok(true)) {
                    break;
                }
                if batch.is_empty() {
                    // Asked ahead; not if those on their way came (or were
                    // refused) meanwhile.
                    let Some(ahead) = ahead.as_ref() else {
                        continue;
                    };
                    let wave = ahead.wave();
                    if wave.on_the_way == 0 {
                        continue;
                    }
                    intake.ahead = Some((Arc::clone(ahead), wave.sold_out_answers));
                }
            }
            metrics::gauge!("stampede_batch_queue_depth", "ticket_type" => ticket_type_id.to_string())
                .set(intake.jobs.len() as f64);
            self.sell_taking(
                ticket_type_id,
                std::mem::take(&mut batch),
                Some(&mut intake),
            )
            .await;
            intake.ahead = None;
        }
        let mut jobs = intake.jobs;
        metrics::gauge!("stampede_batch_queue_depth", "ticket_type" => ticket_type_id.to_string())
            .set(0.0);
        // Idle: close the queue (senders start a new worker), and sell what
        // slipped in before the close.
        {
            let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
            jobs.close();
            if let Entry::Occupied(entry) = queues.entry(ticket_type_id)
                && entry.get().is_closed()
            {
                entry.remove();
            }
        }
        while jobs.recv_many(&mut batch, self.settings.max_batch).await > 0 {
            self.sell(ticket_type_id, std::mem::take(&mut batch)).await;
        }
    }

    async fn sell(&self, ticket_type_id: TicketTypeId, jobs: Vec<Job>) {
        self.sell_taking(ticket_type_id, jobs, None).await;
    }

    /// Sell `jobs` in one transaction, and with them what `intake` has by
    /// the time the row is locked.
    async fn sell_taking(
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
            .or_else(|| opened_ahead.then(|| now + self.settings.deadline))
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
                &self.confirm_key,
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
            &self.confirm_key,
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

/// What a batch did: an answer per job, and what is left. `None`: the job
/// is answered after the commit on its own ([`single`]), which replays the
/// order of its twin (the same buyer and key earlier in the batch, or
/// committed by another instance meanwhile), or sells if the twin failed.
struct Sold {
    answers: Vec<Option<Result<Purchase, AppError>>>,
    sold: usize,
    remaining: Option<i32>,
}

/// Whether the batch failed because it ran into its deadline (the lock or
/// statement timeout that [`sell_batch`] sets).
fn past_deadline(err: &AppError) -> bool {
    let AppError::Internal(cause) = err else {
        return false;
    };
    cause
        .downcast_ref::<sqlx::Error>()
        .and_then(sqlx::Error::as_database_error)
        .and_then(|db| db.code())
        // lock_not_available, query_canceled
        .is_some_and(|code| code == "55P03" || code == "57014")
}

async fn sell_batch(
    db: &PgPool,
    confirm_key: &ConfirmKey,
    ticket_type_id: TicketTypeId,
    jobs: &mut Vec<Job>,
    deadline: Instant,
    intake: Option<&mut Intake>,
) -> Result<Sold, AppError> {
    let waited = Instant::now();
    postgres_round("batch");
    let mut tx = db.begin().await?;
    metrics::histogram!("stampede_db_pool_wait_seconds").record(waited.elapsed().as_secs_f64());
    // Nothing of this batch may commit after its earliest buyer's deadline.
    let left_ms = deadline
        .saturating_duration_since(Instant::now())
        .as_millis()
        .max(1);
    sqlx::query_file!("sql/sale/batch_timeouts.sql", format!("{left_ms}ms"),)
        .fetch_one(&mut *tx)
        .await?;
    let Some(locked) =
        sqlx::query_file_as!(Locked, "sql/sale/batch_lock.sql", ticket_type_id.get(),)
            .fetch_optional(&mut *tx)
            .await?
    else {
        tx.rollback().await?;
        return Ok(Sold::all(jobs, || Err(AppError::NotFound)));
    };
    // A statement of its own, after the lock: it sees what committed meanwhile.
    let event = sqlx::query_file!("sql/sale/batch_event.sql", locked.event_id,)
        .fetch_one(&mut *tx)
        .await?;
    // What came while the row was locked joins this batch: under a burst
    // the lock takes a while, and the next batch would wait for this one.
    if let Some(intake) = intake {
        intake.join(jobs, locked.remaining).await;
    }
    if jobs.is_empty() {
        // Opened ahead, and none came.
        tx.rollback().await?;
        return Ok(Sold::all(jobs, || Err(AppError::NotFound)));
    }
    let jobs: &[Job] = jobs;
    tracing::Span::current().record("size", jobs.len());
    metrics::histogram!("stampede_batch_size").record(jobs.len() as f64);
    let window = SaleWindow {
        status: event.status,
        opens_at: event.sale_opens_at,
        closes_at: event.sale_closes_at,
        starts_at: event.starts_at,
    };

    let limits = BuyerLimits {
        per_ticket_type: locked.max_per_buyer,
        per_event: event.max_per_buyer,
    };

    let emails: Vec<&str> = jobs.iter().map(|j| j.request.email.as_str()).collect();
    let keys: Vec<&str> = jobs
        .iter()
        .map(|j| j.request.idempotency_key.as_str())
        .collect();
    let buyers: Vec<BuyerKey> = jobs
        .iter()
        .map(|j| {
            j.buyer
                .clone()
                .unwrap_or_else(|| BuyerKey::from(&j.request.email))
        })
        .collect();
    let existing = existing_orders(&mut *tx, &emails, &keys).await?;
    let codes = codes(&mut tx, ticket_type_id, locked.event_id, jobs).await?;
    let held = holdings(&mut tx, ticket_type_id, locked.event_id, &buyers).await?;

    let rules = Rules {
        locked: &locked,
        limits,
        window: &window,
        existing: &existing,
    };
    let decisions = decide(jobs, &buyers, &rules, held, codes);
    let selling: Vec<(&Job, &BuyerKey)> = jobs
        .iter()
        .zip(&buyers)
        .zip(&decisions)
        .filter(|(_, d)| matches!(d, Decision::Sell { .. }))
        .map(|(sale, _)| sale)
        .collect();
    // The presale code of each sale, in the same order.
    let code_ids: Vec<Option<uuid::Uuid>> = decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Sell { code } => Some(*code),
            _ => None,
        })
        .collect();
    let created = if selling.is_empty() {
        tx.rollback().await?;
        Written::default()
    } else {
        let hold = event.hold_seconds.map(|seconds| (seconds, confirm_key));
        let written = write(
            &mut tx,
            ticket_type_id,
            &locked,
            limits,
            hold,
            &selling,
            &code_ids,
        )
        .await?;
        tx.commit().await?;
        written
    };

    let answers = jobs
        .iter()
        .zip(decisions)
        .map(|(job, decision)| match decision {
            Decision::Refuse(err) => Some(Err(err)),
            Decision::Replay(order) => Some(replay(order, &job.request)),
            Decision::Sell { .. } => {
                created
                    .orders
                    .get(&order_key(&job.request))
                    .map(|(order, cancel_secret)| {
                        Ok(Purchase::Created {
                            order: order.clone(),
                            cancel_secret: cancel_secret.clone(),
                        })
                    })
            }
            Decision::Twin => None,
        })
        .collect();
    Ok(Sold {
        answers,
        sold: created.orders.len(),
        remaining: created.remaining.or(Some(locked.remaining)),
    })
}

impl Sold {
    fn all(jobs: &[Job], answer: impl Fn() -> Result<Purchase, AppError>) -> Self {
        Self {
            answers: jobs.iter().map(|_| Some(answer())).collect(),
            sold: 0,
            remaining: None,
        }
    }
}

mod ahead;
mod decide;
mod intake;
mod rows;
#[cfg(test)]
mod tests;
