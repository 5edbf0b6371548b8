//! Batches opened ahead of their purchases.
//!
//! Behind the Redis gate a purchase reaches its worker only with Redis's
//! answer, and under a burst's first wave that answer waits tens of
//! milliseconds for the runtime's turn behind the wave. The engine alone
//! begins its transaction at the wave's first purchase, and the wave joins
//! it while it locks the row; behind the gate the transaction began only
//! once the admitted purchases came, so the gate added its round trip to
//! the whole sale.
//!
//! So the first purchase of a ticket type to ask the gate (none other on
//! its way) has the type's worker open a batch ahead: it begins, locks the
//! row and reads the event while Redis answers, then waits for the
//! purchases on their way (each queued, or refused by the gate), for
//! `wait` at most, and sells those that came. It stops waiting early when
//! they would take the tickets left, or when the gate has answered one of
//! them "sold out" (Redis gave its last ticket, which is either here or on
//! another instance: those still on their way here are the wave's refused). A batch opened ahead that got
//! none is rolled back, and the type opens none ahead for
//! [`QUIET_AFTER_NONE`]: buyers the gate refuses (one over the limit,
//! clicking on) cannot make Postgres work.

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use tokio::sync::{Notify, watch};

/// After a batch opened ahead got no purchase, none opens ahead for this
/// long.
const QUIET_AFTER_NONE: Duration = Duration::from_secs(1);

/// One ticket type's purchases on their way to its worker.
#[derive(Debug)]
pub(super) struct Ahead {
    /// The worker's batch opened ahead waits for none left on the way, or
    /// one more answered "sold out".
    wave: watch::Sender<Wave>,
    /// Told by the first of a wave; the worker opens a batch.
    open: Notify,
    /// A batch opened ahead waits this long at most (the gate's call
    /// timeout: by then each purchase on its way has its answer).
    wait: Duration,
    /// No batch opens ahead before then.
    quiet_until: Mutex<Option<Instant>>,
}

/// What a batch opened ahead waits on.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Wave {
    pub(super) on_the_way: usize,
    /// So far, purchases the gate answered "sold out".
    pub(super) sold_out_answers: u64,
}

impl Ahead {
    pub(super) fn new(wait: Duration) -> Self {
        Self {
            wave: watch::Sender::new(Wave::default()),
            open: Notify::new(),
            wait,
            quiet_until: Mutex::new(None),
        }
    }

    /// One more on its way: the first (none other was) asks the worker for
    /// a batch opened ahead, unless the type is quiet.
    pub(super) fn arriving(self: &Arc<Self>) -> OnTheWay {
        // Wakes no one: a batch waiting ahead waits for none left.
        let mut first = false;
        self.wave.send_if_modified(|wave| {
            first = wave.on_the_way == 0;
            wave.on_the_way += 1;
            false
        });
        let quiet = self
            .quiet_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some_and(|until| Instant::now() < until);
        if first && !quiet {
            self.open.notify_one();
        }
        OnTheWay(Arc::clone(self))
    }

    /// Until the first of a wave asks for a batch opened ahead.
    pub(super) async fn asked(&self) {
        self.open.notified().await;
    }

    pub(super) fn wave(&self) -> Wave {
        *self.wave.borrow()
    }

    /// Wakes when none is left on its way, or one is answered "sold out".
    pub(super) fn watch(&self) -> watch::Receiver<Wave> {
        self.wave.subscribe()
    }

    pub(super) fn wait(&self) -> Duration {
        self.wait
    }

    /// A batch opened ahead got no purchase: quiet for a while.
    pub(super) fn got_none(&self) {
        *self
            .quiet_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now() + QUIET_AFTER_NONE);
    }
}

/// A purchase on its way to its worker (asking the gate), until dropped:
/// once it is queued, or refused. Made by `Batcher::on_its_way`
/// ([`super::worker`]).
#[derive(Debug)]
pub struct OnTheWay(Arc<Ahead>);

impl OnTheWay {
    /// The gate answered it "sold out".
    pub fn sold_out(self) {
        self.0.wave.send_modify(|wave| wave.sold_out_answers += 1);
    }
}

impl Drop for OnTheWay {
    fn drop(&mut self) {
        self.0.wave.send_if_modified(|wave| {
            wave.on_the_way = wave.on_the_way.saturating_sub(1);
            wave.on_the_way == 0
        });
    }
}

/// Until the first purchase of a wave on its way asks for a batch opened
/// ahead; never without the gate.
pub(super) async fn asked_ahead(ahead: Option<&Ahead>) {
    match ahead {
        Some(ahead) => ahead.asked().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::{sync::Arc, time::Duration};

    use super::Ahead;

    #[tokio::test]
    async fn the_first_on_its_way_opens_a_batch_and_the_last_gone_wakes_it() {
        let ahead = Arc::new(Ahead::new(Duration::from_millis(100)));
        let mut none_left = ahead.watch();
        let first = ahead.arriving();
        tokio::time::timeout(Duration::from_secs(1), ahead.asked())
            .await
            .expect("the first on its way asks for a batch");
        let second = ahead.arriving();
        assert_eq!(ahead.wave().on_the_way, 2);
        // Only the first of a wave asks.
        assert!(
            tokio::time::timeout(Duration::from_millis(50), ahead.asked())
                .await
                .is_err()
        );
        drop(first);
        assert!(!none_left.has_changed().unwrap(), "one is still on its way");
        drop(second);
        assert!(none_left.has_changed().unwrap());
        assert_eq!(none_left.borrow_and_update().on_the_way, 0);
    }

    #[tokio::test]
    async fn a_sold_out_answer_wakes_the_batch_opened_ahead() {
        let ahead = Arc::new(Ahead::new(Duration::from_millis(100)));
        let mut wave = ahead.watch();
        let _coming = ahead.arriving();
        ahead.arriving().sold_out();
        assert!(wave.has_changed().unwrap());
        let now = *wave.borrow_and_update();
        assert_eq!((now.on_the_way, now.sold_out_answers), (1, 1));
    }

    #[tokio::test]
    async fn after_a_batch_that_got_none_the_next_wave_opens_none() {
        let ahead = Arc::new(Ahead::new(Duration::from_millis(100)));
        ahead.got_none();
        let _on_its_way = ahead.arriving();
        assert!(
            tokio::time::timeout(Duration::from_millis(50), ahead.asked())
                .await
                .is_err()
        );
    }
}
