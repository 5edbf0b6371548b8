//! A short shared cache for the public event list (`/`, `/api/v1/events`):
//! every page is read from Postgres at most once per time-to-live, however
//! many requests ask, and requests that arrive while a page is being read
//! wait for that one read (no stampede on expiry). In-process: each
//! instance has its own, which is fine for a list that may be a second old.

use std::{
    collections::HashMap,
    future::Future,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use tokio::sync::OnceCell;

use crate::{db::events::EventDetail, domain::EventCursor, error::AppError};

/// One page of the public list and where the next one starts.
#[derive(Debug)]
pub struct EventPage {
    pub events: Vec<EventDetail>,
    pub next: Option<EventCursor>,
}

/// Pages kept at most; past it, expired ones are dropped, then all.
const MAX_PAGES: usize = 1024;

type Slot = Arc<OnceCell<Arc<EventPage>>>;

pub struct ListCache {
    ttl: Duration,
    pages: Mutex<HashMap<Option<EventCursor>, (Instant, Slot)>>,
}

impl std::fmt::Debug for ListCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListCache").field("ttl", &self.ttl).finish()
    }
}

impl ListCache {
    /// A cache whose pages live `ttl`; zero turns caching off.
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            pages: Mutex::new(HashMap::new()),
        }
    }

    /// The page after `cursor`, from the cache or from `load` (run once for
    /// all the requests that want it at the same time).
    pub async fn get<F, Fut>(
        &self,
        cursor: Option<EventCursor>,
        load: F,
    ) -> Result<Arc<EventPage>, AppError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<EventPage, AppError>>,
    {
        if self.ttl.is_zero() {
            return load().await.map(Arc::new);
        }
        let slot = self.slot(cursor);
        slot.get_or_try_init(|| async { load().await.map(Arc::new) })
            .await
            .cloned()
    }

    fn slot(&self, cursor: Option<EventCursor>) -> Slot {
        let now = Instant::now();
        // A poisoned lock only means another request panicked while holding
        // it; the map itself is always consistent.
        let mut pages = self
            .pages
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((born, slot)) = pages.get(&cursor)
            && now.duration_since(*born) < self.ttl
        {
            return slot.clone();
        }
        if pages.len() >= MAX_PAGES {
            pages.retain(|_, (born, _)| now.duration_since(*born) < self.ttl);
            if pages.len() >= MAX_PAGES {
                pages.clear();
            }
        }
        let slot = Slot::default();
        pages.insert(cursor, (now, slot.clone()));
        slot
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn empty() -> EventPage {
        EventPage {
            events: Vec::new(),
            next: None,
        }
    }

    #[tokio::test]
    async fn concurrent_requests_share_one_load_and_later_ones_hit_the_cache() {
        let cache = Arc::new(ListCache::new(Duration::from_secs(3600)));
        let loads = Arc::new(AtomicUsize::new(0));
        let barrier = Arc::new(tokio::sync::Barrier::new(50));
        let tasks: Vec<_> = (0..50)
            .map(|_| {
                let (cache, loads, barrier) = (cache.clone(), loads.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    cache
                        .get(None, || async {
                            loads.fetch_add(1, Ordering::SeqCst);
                            tokio::task::yield_now().await;
                            Ok(empty())
                        })
                        .await
                        .map(|_| ())
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        assert_eq!(loads.load(Ordering::SeqCst), 1);
        // Another page is another entry.
        let cursor = EventCursor::parse(Some(
            &EventCursor {
                starts_at: time::OffsetDateTime::UNIX_EPOCH,
                id: uuid::Uuid::nil().into(),
            }
            .encode(),
        ))
        .unwrap();
        cache
            .get(cursor, || async {
                loads.fetch_add(1, Ordering::SeqCst);
                Ok(empty())
            })
            .await
            .unwrap();
        assert_eq!(loads.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_failed_load_is_not_cached_and_zero_ttl_never_caches() {
        let cache = ListCache::new(Duration::from_secs(3600));
        let failed = cache
            .get(None, || async { Err(AppError::Overloaded) })
            .await;
        assert!(failed.is_err());
        assert!(cache.get(None, || async { Ok(empty()) }).await.is_ok());

        let off = ListCache::new(Duration::ZERO);
        let loads = AtomicUsize::new(0);
        for _ in 0..3 {
            off.get(None, || async {
                loads.fetch_add(1, Ordering::SeqCst);
                Ok(empty())
            })
            .await
            .unwrap();
        }
        assert_eq!(loads.load(Ordering::SeqCst), 3);
    }
}
