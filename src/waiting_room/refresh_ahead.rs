//! Answers read from Postgres and kept a short while, refreshed ahead.
//!
//! With a plain time-to-live, every request that came while the one read
//! of an expired entry ran waited for it. Under a rush that read's task
//! queues behind thousands of others, so once a second every purchase
//! stalled for up to a second (`scripts/gate-first-wave` saw 200-400 of
//! 100,000 purchases take over 1 s, all waiting here). Now the first
//! request after `fresh_for` starts one read in the background, and every
//! request meanwhile gets the answer it will replace.

use std::{
    hash::Hash,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use moka::future::Cache;

use crate::error::AppError;

/// Kept this many times `fresh_for` at most: a refresh that keeps failing
/// (Postgres down) leaves the answer in use no longer than that.
const KEEP_FOR_FRESH: u32 = 10;

#[derive(Clone)]
pub(super) struct RefreshAhead<K, V> {
    cache: Cache<K, Arc<Kept<V>>>,
    fresh_for: Duration,
    /// Bumped by every invalidation: a refresh that read before it does not
    /// put its (maybe older) answer back.
    generation: Arc<AtomicU64>,
}

struct Kept<V> {
    value: V,
    read_at: Instant,
    refreshing: AtomicBool,
}

impl<V> Kept<V> {
    fn new(value: V) -> Arc<Self> {
        Arc::new(Self {
            value,
            read_at: Instant::now(),
            refreshing: AtomicBool::new(false),
        })
    }
}

impl<K, V> RefreshAhead<K, V>
where
    K: Hash + Eq + Send + Sync + Clone + 'static,
    V: Send + Sync + Clone + 'static,
{
    pub(super) fn new(capacity: u64, fresh_for: Duration) -> Self {
        Self {
            cache: Cache::builder()
                .max_capacity(capacity)
                .time_to_live(fresh_for * KEEP_FOR_FRESH)
                .build(),
            fresh_for,
            generation: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The answer for `key`: read now if none is kept (concurrent callers
    /// share the one read), else the kept one, with a refresh started in
    /// the background once it is older than `fresh_for`.
    pub(super) async fn get<F, Fut>(&self, key: K, read: F) -> Result<V, Arc<AppError>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, AppError>> + Send + 'static,
    {
        let Some(kept) = self.cache.get(&key).await else {
            let kept = self
                .cache
                .try_get_with(key, async { read().await.map(Kept::new) })
                .await?;
            return Ok(kept.value.clone());
        };
        if kept.read_at.elapsed() >= self.fresh_for && !kept.refreshing.swap(true, Ordering::AcqRel)
        {
            let generation = self.generation.load(Ordering::Acquire);
            let this = self.clone();
            let stale = Arc::clone(&kept);
            let reading = read();
            tokio::spawn(async move {
                match reading.await {
                    Ok(value) if this.generation.load(Ordering::Acquire) == generation => {
                        this.cache.insert(key, Kept::new(value)).await;
                    }
                    Ok(_) => {}
                    Err(err) => {
                        tracing::debug!(error = %err, "refresh failed; the kept answer stands");
                        stale.refreshing.store(false, Ordering::Release);
                    }
                }
            });
        }
        Ok(kept.value.clone())
    }

    /// The kept answer, however old, without reading.
    pub(super) async fn peek(&self, key: &K) -> Option<V> {
        self.cache.get(key).await.map(|kept| kept.value.clone())
    }

    pub(super) async fn invalidate(&self, key: &K) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.cache.invalidate(key).await;
    }

    pub(super) fn invalidate_all(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.cache.invalidate_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use tokio::sync::Notify;

    use super::*;

    const FRESH: Duration = Duration::from_millis(50);

    /// A read that counts itself and, from `slow_from` on, waits for `go`.
    fn reader(
        reads: &Arc<AtomicUsize>,
        go: &Arc<Notify>,
        slow_from: usize,
    ) -> impl FnOnce() -> std::pin::Pin<Box<dyn Future<Output = Result<usize, AppError>> + Send>>
    {
        let reads = Arc::clone(reads);
        let go = Arc::clone(go);
        move || {
            Box::pin(async move {
                let n = reads.fetch_add(1, Ordering::SeqCst) + 1;
                if n >= slow_from {
                    go.notified().await;
                }
                Ok(n)
            })
        }
    }

    #[tokio::test]
    async fn a_stale_answer_is_served_while_one_refresh_reads() {
        let kept = RefreshAhead::<u8, usize>::new(10, FRESH);
        let reads = Arc::new(AtomicUsize::new(0));
        let go = Arc::new(Notify::new());
        assert_eq!(kept.get(1, reader(&reads, &go, 2)).await.unwrap(), 1);
        assert_eq!(kept.get(1, reader(&reads, &go, 2)).await.unwrap(), 1);
        assert_eq!(reads.load(Ordering::SeqCst), 1, "fresh: not read again");

        tokio::time::sleep(FRESH * 2).await;
        // The refresh's read waits for `go`: none of these may wait for it.
        for _ in 0..20 {
            let answer =
                tokio::time::timeout(Duration::from_secs(5), kept.get(1, reader(&reads, &go, 2)))
                    .await
                    .expect("a caller waited for the refresh");
            assert_eq!(answer.unwrap(), 1);
        }
        for _ in 0..100 {
            if reads.load(Ordering::SeqCst) >= 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            reads.load(Ordering::SeqCst),
            2,
            "one refresh, not one per caller"
        );
        go.notify_one();
        for _ in 0..100 {
            if kept.peek(&1).await == Some(2) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(kept.get(1, reader(&reads, &go, 99)).await.unwrap(), 2);
    }

    #[tokio::test]
    async fn a_refresh_that_read_before_an_invalidation_is_not_kept() {
        let kept = RefreshAhead::<u8, usize>::new(10, FRESH);
        let reads = Arc::new(AtomicUsize::new(0));
        let go = Arc::new(Notify::new());
        kept.get(1, reader(&reads, &go, 2)).await.unwrap();
        tokio::time::sleep(FRESH * 2).await;
        assert_eq!(kept.get(1, reader(&reads, &go, 2)).await.unwrap(), 1);
        while reads.load(Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // The organizer changed something while the refresh was reading.
        kept.invalidate(&1).await;
        go.notify_one();
        tokio::time::sleep(FRESH).await;
        assert_eq!(kept.peek(&1).await, None, "the older read was put back");
        // The next caller reads afresh (the third read).
        assert_eq!(kept.get(1, reader(&reads, &go, 99)).await.unwrap(), 3);
    }
}
