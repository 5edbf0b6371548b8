//! The optional Redis gate (issue 9, `--redis-gate`): shed the burst before
//! Postgres. Under 100,000 buyers for 100 tickets, about 100 purchases reach
//! the sale transaction; the others are refused from Redis.
//!
//! Per ticket type, one Redis hash `<prefix>{tt:<id>}:stock` holds a
//! generation token (`gen`), what is left (`left`), the limits (`limit` per
//! buyer, `per_order`) and each buyer's count (`b:<buyer key>`, the folded
//! [`BuyerKey`]); per buyer and idempotency key, an admission record
//! `<prefix>{tt:<id>}:key:…` (`<gen>:<quantity>:<buyer field>`, with a TTL).
//! Every key of a ticket type shares the hash tag `{tt:<id>}`, so each script
//! touches one slot (Redis Cluster).
//!
//! One script per purchase ([`ADMIT`]), atomic in Redis: the admission
//! record first (a key admitted before is a replay: it goes to Postgres and
//! is not counted again, so one buyer's repeated clicks cannot drain the
//! counter), then the order limit, the buyer's count against the ticket
//! type's limit, what is left; then both counts are decremented and the
//! record written. Only admitted purchases (and replays) go on to Postgres,
//! whose transaction keeps the last word: the conditional `UPDATE` runs
//! whatever Redis said. A purchase admitted but not sold by Postgres gives
//! its counts back, once ([`GIVE_BACK`] deletes the record it consumes).
//! The event-wide limit per buyer stays in Postgres alone.
//!
//! **Rebuilds.** Redis is never the source of truth: the hash is rebuilt
//! from one Postgres snapshot ([`REBUILD`], `sql/sale/gate_rebuild.sql`)
//! when it is missing (first purchase, Redis restarted or flushed, expired),
//! when Postgres announces returned stock (`stampede_stock_returned`: a
//! cancellation, a capacity raised), when Redis comes back after a failure,
//! and every `reconcile_every` for the ticket types this instance sells.
//!
//! **Built ahead.** A rebuild at a rush's first purchase makes the whole
//! first wave wait for it (a Postgres read and a script, on a loaded
//! machine: tens of milliseconds). So the counters of a published sale are
//! built before it opens (`build_ahead`): when Postgres announces it
//! published or moved (`stampede_sale_scheduled`, migrations/0019), at
//! start-up, and every `reconcile_every` for the sales that open within
//! `build_ahead` or are open and not sold out ([`ahead`]).
//!
//! **Only when quiet.** A snapshot does not count the purchases admitted
//! but not yet committed: a rebuild under them would set `left` as if their
//! tickets were still for sale, and Redis would admit them twice (Postgres
//! refuses the surplus, but the burst it was to shed reaches it). So every
//! admission bumps the hash's `seq` and joins an in-flight set (per type,
//! `<prefix>{tt:<id>}:inflight`) that it leaves once settled: after its
//! commit (a `ZREM`, off the buyer's answer) or in its give-back. The
//! periodic and returned-stock rebuilds read `seq` and the set before the
//! snapshot and write only if the set was empty and `seq` unchanged by the
//! time they write (atomic in the script): then every admission before the
//! snapshot had committed or been given back, and none came after, so the
//! snapshot is exact. Otherwise they are retried every [`QUIET_RETRY`]
//! until the burst has settled; meanwhile Redis may be low (returned stock
//! not yet on sale), never high. An admission never settled (its instance
//! killed, its `ZREM` lost) stops holding them back after `settle_within`.
//! Two rebuilds are not held back: the one of a missing hash (there is
//! nothing to keep) and the one after Redis comes back from a failure
//! (purchases went to Postgres uncounted meanwhile: Redis may be high).
//!
//! **The generation rule.** Each rebuild writes a fresh random generation;
//! each admission record carries the generation it was counted in. A
//! give-back adds its counts back only if the record's generation is still
//! the hash's: a rebuild since has read Postgres without the admission, so
//! adding it back would count it twice. So Redis is never lower than
//! Postgres except by admissions that will neither commit nor be given back
//! (an instance killed between the gate and the commit, a give-back lost
//! while Redis was unreachable, a rebuild that read before a cancellation
//! and wrote after the next one): the next periodic rebuild, within
//! `reconcile_every` once the sale is quiet, puts those tickets back on sale.
//!
//! **A sold-out answer waits for the sale.** Redis says "sold out" once
//! every ticket is admitted, before Postgres has decided the admitted
//! purchases. Such a refusal waits (up to 1 s, [`selling`]) until this
//! instance's admitted purchases of the type are decided; if one was
//! refused for a reason of its own (a limit only Postgres knows) and given
//! back, the refused purchase asks Redis again. So "sold out" is final, and
//! under a burst the refused do not come straight back for the CPU that
//! the commits need.
//!
//! **Redis Cluster.** With [`GateRedis::Cluster`] the same scripts run on a
//! cluster (redis-rs' cluster client): each touches the keys of one ticket
//! type, one hash slot, so one master; EVALSHA goes to that master, and a
//! script it does not know yet is loaded on every master (NOSCRIPT
//! fallback). Ticket types spread over the masters by their ids.
//!
//! **Redis down or slow.** Every call has a short timeout; on any failure
//! the purchase goes to Postgres alone, counted
//! (`stampede_gate_total{outcome="fallback"}`). An error, or
//! [`TIMEOUTS_TO_TRIP`] timeouts in a row, is logged once and the gate is
//! skipped for `retry_after`; when Redis answers again, the ticket types
//! are rebuilt before they are admitted. A timed-out admission may have
//! been counted in Redis: if Postgres then sells it, both agree; if not,
//! Redis stays low by it until the next periodic rebuild.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use redis::Script;
use sqlx::PgPool;
use tokio::sync::Notify;

use connection::{Client, Connection, Connections};
use rebuild::{QUIET_RETRY, Rebuild, RebuildSlot, Rebuilt, reconcile};
use scripts::{ADMIT, GIVE_BACK, MAY_REPLAY, REBUILD};
use selling::Selling;

use super::{request::PurchaseRequest, stock_listener};
use crate::{
    domain::{BuyerKey, TicketTypeId},
    error::AppError,
};

/// Where the gate counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateRedis {
    /// One Redis server (a `redis://` URL).
    Server(String),
    /// A Redis Cluster, known by some of its nodes (`host:port` or
    /// `redis://host:port`); the others are discovered.
    Cluster(Vec<String>),
}

/// For logs: where the gate counts, without the URL's password.
impl std::fmt::Display for GateRedis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Server(url) => f.write_str(&without_password(url)),
            Self::Cluster(nodes) => {
                let nodes: Vec<_> = nodes.iter().map(|node| without_password(node)).collect();
                write!(f, "cluster {}", nodes.join(","))
            }
        }
    }
}

/// `redis://user:secret@host` as `redis://user:***@host`; text that is
/// not a URL with a password as it is.
fn without_password(url: &str) -> std::borrow::Cow<'_, str> {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            // A URL with a password has a host, so this cannot fail.
            let _ = parsed.set_password(Some("***"));
            parsed.to_string().into()
        }
        _ => url.into(),
    }
}

#[derive(Debug, Clone)]
pub struct GateSettings {
    /// Each Redis call waits this long at most (a rebuild ten times this).
    pub timeout: Duration,
    /// The ticket types this instance sells are rebuilt from Postgres this
    /// often: what a crash between the gate and the commit can keep unsold.
    pub reconcile_every: Duration,
    /// After a Redis failure, purchases skip the gate for this long.
    pub retry_after: Duration,
    /// Admission records (and idle stock hashes) expire after this.
    pub record_ttl: Duration,
    /// Prepended to every key (tests isolate themselves with it).
    pub prefix: String,
    /// The counters of a published sale are built once it opens within
    /// this (when it is published, at start-up, every `reconcile_every`),
    /// not at its first purchase; `None`: at its first purchase.
    pub build_ahead: Option<Duration>,
    /// An admission neither settled nor given back within this is taken for
    /// lost (its instance died) and no longer holds back the rebuilds that
    /// wait for quiet. Longer than any purchase takes.
    pub settle_within: Duration,
}

impl GateSettings {
    /// Connecting (and a rebuild) gets a longer budget than a purchase's
    /// call: the first purchases of a burst all wait for the one connection.
    fn connect_timeout(&self) -> Duration {
        (self.timeout * 10).max(Duration::from_secs(1))
    }
}

impl Default for GateSettings {
    fn default() -> Self {
        Self {
            timeout: Duration::from_millis(100),
            reconcile_every: Duration::from_secs(10),
            retry_after: Duration::from_secs(1),
            record_ttl: Duration::from_secs(24 * 3600),
            prefix: "stampede:gate:".to_owned(),
            settle_within: Duration::from_secs(30),
            build_ahead: Some(Duration::from_secs(15 * 60)),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("redis did not answer within {0:?}")]
    Timeout(Duration),
    #[error("postgres: {0}")]
    Db(#[from] sqlx::Error),
    #[error("unexpected answer from the gate script: {0}")]
    Answer(String),
}

/// The gate's answer to one purchase.
#[derive(Debug)]
pub(super) enum Admission {
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
pub(super) struct Ticket {
    stock: String,
    record: String,
    inflight: String,
    value: String,
    generation: String,
    quantity: i32,
    buyer: String,
}

#[derive(Debug, Default)]
struct Local {
    /// Ticket types bought through this instance, and when last.
    seen: HashMap<TicketTypeId, Instant>,
    /// To rebuild, and how: [`Rebuild::Always`] before the next admission,
    /// [`Rebuild::WhenQuiet`] as soon as no purchase is in flight.
    stale: HashMap<TicketTypeId, Rebuild>,
    /// A purchase tried a quiet rebuild of the type: other purchases do
    /// not try again before then (the reconciler does, at its own pace).
    busy_until: HashMap<TicketTypeId, Instant>,
    /// When each was last rebuilt by this instance.
    rebuilt: HashMap<TicketTypeId, Instant>,
    /// Skip the gate until then (Redis failed).
    down_until: Option<Instant>,
}

impl Local {
    /// Mark a type to rebuild; the stronger mode wins.
    fn mark(&mut self, id: TicketTypeId, mode: Rebuild) {
        let entry = self.stale.entry(id).or_insert(mode);
        *entry = (*entry).max(mode);
    }
}

/// Timeouts in a row that take the gate out of the way for `retry_after`.
/// One late answer sends only its own purchase to Postgres: under a burst on
/// a busy machine a few answers come late while Redis is fine, and standing
/// aside for everyone then sent the whole first wave to Postgres. A Redis
/// that has stopped answering times out every call, and trips it at once.
const TIMEOUTS_TO_TRIP: u32 = 16;

pub struct Gate {
    db: PgPool,
    redis: Client,
    /// One multiplexed connection for all purchases (concurrent calls are
    /// pipelined on it); dropped on an error (not on a mere timeout) and
    /// made again on demand. Cloned under a lock never held across an
    /// await: an async mutex here made every call of a burst queue behind
    /// the others' wake-ups.
    conn: Mutex<Option<Connections>>,
    /// One connect at a time.
    connecting: tokio::sync::Mutex<()>,
    settings: GateSettings,
    admit: Script,
    give_back: Script,
    may_replay: Script,
    rebuild: Script,
    local: Mutex<Local>,
    /// One rebuild at a time per ticket type in this instance.
    rebuilding: Mutex<HashMap<TicketTypeId, Arc<RebuildSlot>>>,
    /// Wakes the reconciler for stale ticket types.
    wake: Arc<Notify>,
    /// Redis failed and has not answered since (logged once per outage).
    degraded: AtomicBool,
    /// Calls timed out since the last answer.
    timeouts_in_a_row: AtomicU32,
    admitted: AtomicU64,
    /// Per ticket type, this instance's admitted purchases that Postgres
    /// has not decided yet ([`InFlight`]).
    selling: Mutex<HashMap<TicketTypeId, tokio::sync::watch::Sender<Selling>>>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Gate {
    /// Must be called inside a Tokio runtime: it starts the reconciler and
    /// a listener for returned stock. Connects lazily.
    pub fn start(
        db: PgPool,
        redis: GateRedis,
        settings: GateSettings,
    ) -> Result<Arc<Self>, AppError> {
        let redis = Client::open(&redis, &settings).map_err(AppError::internal)?;
        let gate = Arc::new(Self {
            db: db.clone(),
            redis,
            conn: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
            settings,
            admit: Script::new(ADMIT),
            give_back: Script::new(GIVE_BACK),
            may_replay: Script::new(MAY_REPLAY),
            rebuild: Script::new(REBUILD),
            local: Mutex::new(Local::default()),
            rebuilding: Mutex::new(HashMap::new()),
            wake: Arc::new(Notify::new()),
            degraded: AtomicBool::new(false),
            timeouts_in_a_row: AtomicU32::new(0),
            admitted: AtomicU64::new(0),
            selling: Mutex::new(HashMap::new()),
        });
        tokio::spawn(stock_listener::listen(db, Arc::downgrade(&gate)));
        tokio::spawn(reconcile(Arc::downgrade(&gate), Arc::clone(&gate.wake)));
        let warming = Arc::downgrade(&gate);
        tokio::spawn(async move {
            if let Some(gate) = warming.upgrade() {
                gate.warm_up().await;
            }
        });
        Ok(gate)
    }

    /// Connect and load the scripts before the first purchase, so that the
    /// first wave of a burst neither waits for the connection nor sends
    /// each script's whole text after a NOSCRIPT. A failure changes
    /// nothing: the first purchases connect and load as before.
    async fn warm_up(&self) {
        let scripts = [
            &self.admit,
            &self.give_back,
            &self.may_replay,
            &self.rebuild,
        ];
        let loaded = self
            .redis(self.settings.connect_timeout(), async |conn| {
                for script in scripts {
                    script.prepare_invoke().load_async(conn).await?;
                }
                Ok(())
            })
            .await;
        if let Err(err) = loaded {
            tracing::debug!(error = %err, "Redis gate: not warmed up; the first purchase connects");
        }
        self.build_ahead().await;
    }

    /// Purchases admitted so far by this instance (what went on to Postgres
    /// counted), for tests and benchmarks.
    pub fn admitted(&self) -> u64 {
        self.admitted.load(Ordering::Relaxed)
    }

    /// Whether purchases skip the gate now (Redis failed, or timed out
    /// [`TIMEOUTS_TO_TRIP`] times in a row, less than `retry_after` ago),
    /// for tests and benchmarks.
    pub fn standing_aside(&self) -> bool {
        self.local()
            .down_until
            .is_some_and(|until| Instant::now() < until)
    }

    fn local(&self) -> std::sync::MutexGuard<'_, Local> {
        self.local.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn stock_key(&self, id: TicketTypeId) -> String {
        format!("{}{{tt:{id}}}:stock", self.settings.prefix)
    }

    fn inflight_key(&self, id: TicketTypeId) -> String {
        format!("{}{{tt:{id}}}:inflight", self.settings.prefix)
    }

    fn record_key(&self, request: &PurchaseRequest) -> String {
        let email = request.email.as_str();
        format!(
            "{}{{tt:{}}}:key:{}:{email}:{}",
            self.settings.prefix,
            request.ticket_type_id,
            email.len(),
            request.idempotency_key.as_str(),
        )
    }

    /// Each purchase's call waits this long at most.
    pub(super) fn call_timeout(&self) -> Duration {
        self.settings.timeout
    }

    /// Check and count one purchase in Redis.
    pub(super) async fn admit(&self, request: &PurchaseRequest) -> Admission {
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
    pub(super) async fn may_replay(&self, request: &PurchaseRequest) -> bool {
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
    pub(super) async fn give_back(&self, ticket: &Ticket) {
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
    pub(super) async fn settle(&self, ticket: &Ticket) {
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

    /// One call on the shared connection, within `timeout` (connecting
    /// included). On an error the connection is dropped, to be made again;
    /// on a timeout it is kept (its other calls are answered on it, and a
    /// late answer to this one is discarded).
    async fn redis<T>(
        &self,
        timeout: Duration,
        call: impl AsyncFnOnce(&mut Connection) -> redis::RedisResult<T>,
    ) -> Result<T, GateError> {
        let connect = self.settings.connect_timeout();
        let answer = async {
            let mut conn = tokio::time::timeout(connect, self.connection())
                .await
                .map_err(|_| GateError::Timeout(connect))??;
            tokio::time::timeout(timeout, call(&mut conn))
                .await
                .map_err(|_| GateError::Timeout(timeout))?
                .map_err(GateError::from)
        }
        .await;
        if let Err(err) = &answer
            && !matches!(err, GateError::Timeout(_))
        {
            *self.conn_slot() = None;
        }
        answer
    }

    async fn connection(&self) -> redis::RedisResult<Connection> {
        if let Some(conns) = &*self.conn_slot() {
            return Ok(conns.pick());
        }
        let _one_connect = self.connecting.lock().await;
        if let Some(conns) = &*self.conn_slot() {
            return Ok(conns.pick());
        }
        let made = self.redis.connect().await?;
        let conn = made.pick();
        *self.conn_slot() = Some(made);
        Ok(conn)
    }

    fn conn_slot(&self) -> std::sync::MutexGuard<'_, Option<Connections>> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn failed(&self, err: &GateError) {
        metrics::counter!("stampede_gate_errors_total").increment(1);
        if matches!(err, GateError::Timeout(_))
            && self.timeouts_in_a_row.fetch_add(1, Ordering::Relaxed) + 1 < TIMEOUTS_TO_TRIP
        {
            return;
        }
        metrics::gauge!("stampede_gate_up").set(0.0);
        if !self.degraded.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                error = %err,
                retry_after_ms = self.settings.retry_after.as_millis() as u64,
                "Redis gate unavailable: purchases go to Postgres alone until it answers"
            );
        }
        self.local().down_until = Some(Instant::now() + self.settings.retry_after);
    }

    /// Redis answered: if it had failed, rebuild before admitting again
    /// (it may have lost its data, and sales went uncounted meanwhile).
    fn answered(&self) {
        self.timeouts_in_a_row.store(0, Ordering::Relaxed);
        if self.degraded.swap(false, Ordering::Relaxed) {
            tracing::info!("Redis gate back: rebuilding its counters from Postgres");
            metrics::gauge!("stampede_gate_up").set(1.0);
            let mut local = self.local();
            let seen: Vec<TicketTypeId> = local.seen.keys().copied().collect();
            for id in seen {
                local.mark(id, Rebuild::Always);
            }
            drop(local);
            self.wake.notify_one();
        }
    }
}

fn outcome(admission: Admission, label: &'static str) -> Admission {
    metrics::counter!("stampede_gate_total", "outcome" => label).increment(1);
    admission
}

/// Now, as the in-flight set scores admissions. Instances' clocks need to
/// agree only to well within `settle_within`.
fn unix_ms() -> u64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    millis(since_epoch)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

mod ahead;
mod connection;
mod rebuild;
mod scripts;
mod selling;
#[cfg(test)]
mod tests;
