//! The load shape: virtual buyers in a closed loop, or an open loop at a
//! fixed arrival rate (wrk2's schedule: each connection sends at its own
//! fixed interval and latency counts from the scheduled time, so a slow
//! answer does not hide the requests that should have been sent meanwhile).

use std::{
    borrow::Cow,
    collections::BTreeMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use uuid::Uuid;

use crate::{
    buyer::{Buyer, Outcome, Script},
    cli::RunArgs,
    cpu::process_cpu,
    http::{Conn, Target},
    scenario::Plan,
    setup::Sale,
};

/// Latency histograms in microseconds, up to 10 minutes, 3 digits.
pub type Latency = Histogram<u64>;

#[derive(Clone)]
pub struct Histograms {
    /// A whole attempt, from its (scheduled) start.
    pub attempt: Latency,
    /// Form purchases only: the page, and the post.
    pub page: Latency,
    pub post: Latency,
}

impl Histograms {
    fn new() -> anyhow::Result<Self> {
        let empty = Histogram::new_with_bounds(1, 600_000_000, 3)?;
        Ok(Self {
            attempt: empty.clone(),
            page: empty.clone(),
            post: empty,
        })
    }

    fn add(&mut self, other: &Self) {
        let _ = self.attempt.add(&other.attempt);
        let _ = self.page.add(&other.page);
        let _ = self.post.add(&other.post);
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}

/// Counts kept by each buyer, merged at the end.
#[derive(Default)]
pub struct Tally {
    pub attempts: u64,
    pub ok: u64,
    pub sold: Vec<Uuid>,
    pub refused: BTreeMap<Cow<'static, str>, u64>,
    pub failed: BTreeMap<Cow<'static, str>, u64>,
    pub unsure_keys: Vec<String>,
    /// When the last purchase answered as sold came back, from the start:
    /// the tickets' selling time.
    pub last_sold: Option<Duration>,
}

impl Tally {
    fn merge(&mut self, other: Self) {
        self.attempts += other.attempts;
        self.ok += other.ok;
        self.sold.extend(other.sold);
        for (reason, n) in other.refused {
            *self.refused.entry(reason).or_default() += n;
        }
        for (reason, n) in other.failed {
            *self.failed.entry(reason).or_default() += n;
        }
        self.unsure_keys.extend(other.unsure_keys);
        self.last_sold = self.last_sold.max(other.last_sold);
    }
}

/// What the run saw, from the client's side.
pub struct Played {
    pub tally: Tally,
    pub latency: Histograms,
    pub elapsed: Duration,
    pub client_cpu: Option<Duration>,
}

/// Shared by every buyer of a run.
struct Run {
    started: Instant,
    deadline: Option<Instant>,
    attempts: Option<u64>,
    next: AtomicU64,
    done: AtomicU64,
    sold: AtomicU64,
    failed: AtomicU64,
    /// Latencies by shard, so that buyers rarely wait on one lock.
    shards: Vec<Mutex<Histograms>>,
}

impl Run {
    /// The next attempt's number, while the run's bounds allow one.
    fn next_attempt(&self, now: Instant) -> Option<u64> {
        if self.deadline.is_some_and(|d| now >= d) {
            return None;
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        self.attempts.is_none_or(|max| n < max).then_some(n)
    }
}

pub async fn play(
    plan: Arc<Plan>,
    sale: &Sale,
    targets: Vec<Target>,
    args: &RunArgs,
) -> anyhow::Result<Played> {
    anyhow::ensure!(!targets.is_empty(), "no --url to play against");
    let script = Arc::new(Script::new(plan.clone(), sale)?);
    // Connect every buyer first, so that the clock starts on a warm start line.
    let connecting: Vec<_> = (0..plan.concurrency)
        .map(|i| {
            let mut conn = Conn::new(targets[i % targets.len()].clone());
            tokio::spawn(async move {
                let _ = conn.connect().await;
                conn
            })
        })
        .collect();
    let mut buyers = Vec::with_capacity(connecting.len());
    for handle in connecting {
        if let Ok(conn) = handle.await {
            buyers.push(Buyer::new(conn, script.clone()));
        }
    }

    let cpu_before = process_cpu(std::process::id());
    let started = Instant::now();
    let shards = (args.threads.max(1) * 8).min(buyers.len().max(1));
    let empty = Histograms::new()?;
    let run = Arc::new(Run {
        started,
        deadline: plan.duration.map(|d| started + d),
        attempts: plan.attempts,
        next: AtomicU64::new(0),
        done: AtomicU64::new(0),
        sold: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        shards: (0..shards).map(|_| Mutex::new(empty.clone())).collect(),
    });
    let progress = progress_bar(&plan, args.quiet || args.json, run.clone());

    // Open loop: buyer i sends at started + i/rate + k * concurrency/rate.
    let interval = plan
        .rate
        .map(|rate| Duration::from_secs_f64(buyers.len() as f64 / rate));
    let handles: Vec<_> = buyers
        .into_iter()
        .enumerate()
        .map(|(i, buyer)| {
            let (run, rate) = (run.clone(), plan.rate);
            let first = rate.map(|r| started + Duration::from_secs_f64(i as f64 / r));
            tokio::spawn(buy_loop(buyer, run, i % shards, first.zip(interval)))
        })
        .collect();
    let mut tally = Tally::default();
    for handle in handles {
        if let Ok(t) = handle.await {
            tally.merge(t);
        }
    }
    let elapsed = started.elapsed();
    progress.finish();
    let mut latency = empty;
    for shard in &run.shards {
        if let Ok(h) = shard.lock() {
            latency.add(&h);
        }
    }
    let client_cpu = cpu_before
        .zip(process_cpu(std::process::id()))
        .map(|(before, after)| after.saturating_sub(before));
    Ok(Played {
        tally,
        latency,
        elapsed,
        client_cpu,
    })
}

async fn buy_loop(
    mut buyer: Buyer,
    run: Arc<Run>,
    shard: usize,
    schedule: Option<(Instant, Duration)>,
) -> Tally {
    let mut tally = Tally::default();
    let mut next_send = schedule.map(|(first, _)| first);
    loop {
        let start = match next_send {
            Some(at) => {
                if run.deadline.is_some_and(|d| at >= d) {
                    break;
                }
                tokio::time::sleep_until(at.into()).await;
                at
            }
            None => Instant::now(),
        };
        let Some(n) = run.next_attempt(start) else {
            break;
        };
        let attempt = buyer.attempt(n, start).await;
        let took = start.elapsed();
        if let Ok(mut h) = run.shards[shard].lock() {
            let _ = h.attempt.record(micros(took));
            if let Some(page) = attempt.page {
                let _ = h.page.record(micros(page));
            }
            if let Some(post) = attempt.post {
                let _ = h.post.record(micros(post));
            }
        }
        tally.attempts += 1;
        match attempt.outcome {
            Outcome::Sold(id) => {
                tally.sold.push(id);
                tally.last_sold = Some(run.started.elapsed());
                run.sold.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Ok => tally.ok += 1,
            Outcome::Refused(reason) => *tally.refused.entry(reason).or_default() += 1,
            Outcome::Failed(reason) => {
                *tally.failed.entry(reason).or_default() += 1;
                run.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
        tally.unsure_keys.extend(attempt.unsure_key);
        run.done.fetch_add(1, Ordering::Relaxed);
        if let (Some(at), Some((_, interval))) = (next_send.as_mut(), schedule) {
            *at += interval;
        }
    }
    tally
}

struct Progress {
    bar: ProgressBar,
    ticker: tokio::task::JoinHandle<()>,
}

impl Progress {
    fn finish(self) {
        self.ticker.abort();
        self.bar.finish_and_clear();
    }
}

/// A progress bar on stderr (hidden when it is not a terminal), updated
/// from the shared counters four times a second.
fn progress_bar(plan: &Plan, hidden: bool, run: Arc<Run>) -> Progress {
    let (length, by_time) = match (plan.attempts, plan.duration) {
        (_, Some(d)) => (u64::try_from(d.as_millis()).unwrap_or(u64::MAX), true),
        (Some(n), None) => (n, false),
        (None, None) => (0, false),
    };
    let bar = ProgressBar::with_draw_target(
        Some(length),
        if hidden {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        },
    );
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let shown = bar.clone();
    let ticker = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        loop {
            tick.tick().await;
            let done = run.done.load(Ordering::Relaxed);
            let secs = run.started.elapsed().as_secs_f64().max(1e-3);
            bar.set_position(if by_time {
                u64::try_from(run.started.elapsed().as_millis()).unwrap_or(u64::MAX)
            } else {
                done
            });
            bar.set_message(format!(
                "{done} attempts ({:.0}/s), {} sold, {} errors",
                done as f64 / secs,
                run.sold.load(Ordering::Relaxed),
                run.failed.load(Ordering::Relaxed)
            ));
        }
    });
    Progress { bar: shown, ticker }
}
