//! Collecting: a queue per ticket type and a worker that takes what has
//! arrived (up to `max_batch`) and has it sold as one batch
//! ([`super::seller`]). Behind the gate, the first purchase of a wave has
//! the worker open its batch ahead ([`super::ahead`]).

use std::{
    collections::{HashMap, hash_map::Entry},
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicI64, Ordering},
    },
    time::{Duration, Instant},
};

use sqlx::PgPool;
use time::OffsetDateTime;
use tokio::sync::{mpsc, oneshot};

use super::{
    ahead::{Ahead, OnTheWay, asked_ahead},
    intake::Intake,
    job::Job,
    seller::Seller,
    settings::EngineSettings,
};
use crate::{
    domain::{BuyerKey, ConfirmKey, TicketTypeId},
    error::AppError,
    sale::{holds::Holding, outcome::Purchase, request::PurchaseRequest, sold_out::SoldOut},
};

/// The engine: per ticket type, a queue of purchases and a worker that
/// sells them in batches.
pub(in crate::sale) struct Batcher {
    settings: EngineSettings,
    /// Sells each batch the worker takes.
    seller: Seller,
    pub(super) queues: Mutex<HashMap<TicketTypeId, mpsc::Sender<Job>>>,
    /// Per ticket type, the purchases on their way through the gate
    /// ([`super::ahead`]); kept when an idle worker stops.
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
            seller: Seller {
                db,
                sold_out,
                holding: Holding {
                    key: confirm_key,
                    rules: settings.holds,
                },
                deadline: settings.deadline,
            },
            settings,
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

    /// A purchase of the type is on its way (asking the Redis gate), until
    /// the returned token is dropped or queued with it
    /// ([`Self::purchase_on_its_way`]): the first of a wave has the worker
    /// open a batch ahead, which waits up to `wait` for those on their way
    /// ([`super::ahead`]).
    pub fn on_its_way(self: &Arc<Self>, ticket_type_id: TicketTypeId, wait: Duration) -> OnTheWay {
        let ahead = Arc::clone(
            self.aheads
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(ticket_type_id)
                .or_insert_with(|| Arc::new(Ahead::new(wait))),
        );
        // A worker to open it.
        self.queue(ticket_type_id);
        ahead.arriving()
    }

    /// [`Self::purchase`] of a purchase that was on its way: no longer once
    /// queued.
    pub async fn purchase_on_its_way(
        self: &Arc<Self>,
        now: OffsetDateTime,
        request: &PurchaseRequest,
        on_its_way: OnTheWay,
    ) -> Result<Purchase, AppError> {
        self.submit(now, request, false, Some(on_its_way)).await
    }

    pub(super) async fn submit(
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
    pub(super) fn queue(self: &Arc<Self>, ticket_type_id: TicketTypeId) -> mpsc::Sender<Job> {
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
        let mut depth = QueueShare::default();
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
            depth.set(intake.jobs.len());
            self.seller
                .sell_taking(
                    ticket_type_id,
                    std::mem::take(&mut batch),
                    Some(&mut intake),
                )
                .await;
            intake.ahead = None;
        }
        let mut jobs = intake.jobs;
        depth.set(0);
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

    /// Sell `jobs` in one transaction (and each alone if it fails).
    pub(super) async fn sell(&self, ticket_type_id: TicketTypeId, jobs: Vec<Job>) {
        self.seller.sell_taking(ticket_type_id, jobs, None).await;
    }
}

/// Purchases waiting in every queue of this process. The gauge
/// `stampede_batch_queue_depth` is their sum, not a series per ticket type:
/// a label with the type's id would name hidden and unpublished types.
static QUEUED: AtomicI64 = AtomicI64::new(0);

/// One worker's share of [`QUEUED`], given back when the worker stops.
#[derive(Debug, Default)]
struct QueueShare(i64);

impl QueueShare {
    fn set(&mut self, depth: usize) {
        let depth = i64::try_from(depth).unwrap_or(i64::MAX);
        let change = depth - self.0;
        self.0 = depth;
        let total = QUEUED.fetch_add(change, Ordering::Relaxed) + change;
        metrics::gauge!("stampede_batch_queue_depth").set(total as f64);
    }
}

impl Drop for QueueShare {
    fn drop(&mut self) {
        self.set(0);
    }
}
