//! A future run in place that, dropped before its end (the buyer went
//! away), is finished in a task of its own: what follows an admitted
//! purchase's sale (settling it in the Redis gate, or giving its counts
//! back) is never cut short. Run in place rather than spawned up front: a
//! spawned task waits its turn behind the worker's whole run queue, which
//! under a rush's first wave held each admitted purchase back.

use std::{
    pin::Pin,
    task::{Context, Poll},
};

pub(super) struct FinishOnDrop<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    /// `None` once it has ended.
    rest: Option<Pin<Box<F>>>,
}

impl<F> FinishOnDrop<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    pub(super) fn new(future: F) -> Self {
        Self {
            rest: Some(Box::pin(future)),
        }
    }
}

impl<F> Future for FinishOnDrop<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // Polled again after its end: pending, like a fused future.
        let Some(rest) = self.rest.as_mut() else {
            return Poll::Pending;
        };
        let output = std::task::ready!(rest.as_mut().poll(cx));
        self.rest = None;
        Poll::Ready(output)
    }
}

impl<F> Drop for FinishOnDrop<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn drop(&mut self) {
        // Outside a runtime (it is shutting down) there is nothing to
        // finish it on; the periodic reconcile puts Redis right.
        if let Some(rest) = self.rest.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(rest);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::{
            Arc,
            atomic::{AtomicBool, Ordering},
        },
        time::Duration,
    };

    use super::FinishOnDrop;

    /// Awaited to its end, it gives its output; dropped midway, it still
    /// runs to its end, in a task of its own.
    #[tokio::test]
    async fn dropped_midway_it_still_runs_to_its_end() {
        assert_eq!(FinishOnDrop::new(async { 7 }).await, 7);

        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let ended = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&ended);
        let mut future = Box::pin(FinishOnDrop::new(async move {
            let _ = released.await;
            flag.store(true, Ordering::SeqCst);
        }));
        let polled = tokio::time::timeout(Duration::from_millis(50), future.as_mut()).await;
        assert!(polled.is_err(), "it ended before it was released");
        drop(future);
        release.send(()).unwrap();
        for _ in 0..100 {
            if ended.load(Ordering::SeqCst) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the dropped future never ran to its end");
    }
}
