//! Where a worker's jobs come from: its queue, and what a batch left for
//! the next.

use std::{sync::Arc, time::Instant};

use tokio::sync::mpsc;

use super::{ahead::Ahead, job::Job};
use crate::error::AppError;

pub(super) struct Intake {
    pub(super) jobs: mpsc::Receiver<Job>,
    /// Replay-only jobs that came while a batch ran: for the next one.
    pub(super) carried: Vec<Job>,
    /// Jobs in one batch at most.
    pub(super) max: usize,
    /// Set for a batch opened ahead ([`super::ahead`]): it waits for the
    /// purchases on their way; with the gate's "sold out" answers when it
    /// opened.
    pub(super) ahead: Option<(Arc<Ahead>, u64)>,
}

impl Intake {
    /// What has come by now joins `jobs` (up to `max`): replay-only jobs
    /// wait for the next batch, late ones are refused. A batch opened ahead
    /// first waits for the purchases on their way, until they would take
    /// the `remaining` tickets or the gate answers one "sold out" (a
    /// wave's refused need not be waited for).
    pub(super) async fn join(&mut self, jobs: &mut Vec<Job>, remaining: i32) {
        self.take_queued(jobs);
        let Some((ahead, sold_out_answers)) = self.ahead.take() else {
            return;
        };
        let until = tokio::time::Instant::now() + ahead.wait();
        let mut wave = ahead.watch();
        loop {
            let asked: i64 = jobs
                .iter()
                .map(|j| i64::from(j.request.quantity.get()))
                .sum();
            if jobs.len() >= self.max || asked >= i64::from(remaining) {
                break;
            }
            // Each one leaves after it is queued: none left, all are here.
            let now = *wave.borrow_and_update();
            if now.on_the_way == 0 || now.sold_out_answers > sold_out_answers {
                self.take_queued(jobs);
                break;
            }
            tokio::select! {
                job = self.jobs.recv() => match job {
                    Some(job) => self.accept(job, jobs, Instant::now()),
                    None => break,
                },
                changed = wave.changed() => if changed.is_err() { break },
                () = tokio::time::sleep_until(until) => break,
            }
        }
        let got = if jobs.is_empty() { "none" } else { "some" };
        metrics::counter!("stampede_batch_ahead_total", "got" => got).increment(1);
        if jobs.is_empty() {
            ahead.got_none();
        }
    }

    fn take_queued(&mut self, jobs: &mut Vec<Job>) {
        let room = self.max.saturating_sub(jobs.len());
        let now = Instant::now();
        for _ in 0..room {
            let Ok(job) = self.jobs.try_recv() else {
                break;
            };
            self.accept(job, jobs, now);
        }
    }

    fn accept(&mut self, job: Job, jobs: &mut Vec<Job>, now: Instant) {
        if job.replay_only {
            self.carried.push(job);
        } else if job.deadline <= now {
            let _ = job.reply.send(Err(AppError::Overloaded));
        } else {
            jobs.push(job);
        }
    }
}
