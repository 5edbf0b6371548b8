//! One connection: hyper's HTTP/1 server, plus the deadlines hyper does not
//! keep by itself. A watchdog per connection closes it when
//! - no request is open and no byte arrived for the idle timeout;
//! - a request head started arriving but is not complete within the
//!   header-read timeout (counted from its first byte);
//! - a request is open and no byte moved either way for the request timeout
//!   plus the header-read timeout (a client that stopped reading its answer).
//!
//! Request bodies have their own deadline, in `web::admission`.

use std::{
    convert::Infallible,
    future::Future,
    io,
    net::SocketAddr,
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    task::{Context, Poll},
    time::Duration,
};

use axum::{Router, body::Body, extract::ConnectInfo};
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::{Request, Response, body::Incoming};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
    sync::Notify,
    time::Instant,
};
use tower::ServiceExt;

#[derive(Debug, Clone, Copy)]
pub(super) struct Deadlines {
    pub header_read: Duration,
    pub idle: Duration,
    pub stalled: Duration,
}

impl Deadlines {
    /// A connection's; of the reserve (`super::reserve`), shorter: a probe
    /// sends its head at once, so a client that idles there gives its seat
    /// back quickly.
    pub(super) fn of(self, reserve: bool) -> Self {
        if !reserve {
            return self;
        }
        let short = Duration::from_secs(2);
        Self {
            header_read: self.header_read.min(short),
            idle: self.idle.min(short),
            stalled: self.stalled,
        }
    }
}

/// Why the watchdog closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expired {
    Idle,
    SlowHead,
    Stalled,
}

/// What the watchdog needs to know about a connection.
#[derive(Debug)]
pub(super) struct Activity {
    state: Mutex<State>,
    changed: Notify,
    deadlines: Deadlines,
}

#[derive(Debug)]
struct State {
    /// Requests whose response is not fully handed to the socket yet.
    open: usize,
    idle_since: Instant,
    /// When the first byte of the next request head arrived.
    head_started: Option<Instant>,
    last_io: Instant,
}

impl Activity {
    pub(super) fn new(deadlines: Deadlines) -> Arc<Self> {
        let now = Instant::now();
        Arc::new(Self {
            state: Mutex::new(State {
                open: 0,
                idle_since: now,
                head_started: None,
                last_io: now,
            }),
            changed: Notify::new(),
            deadlines,
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn read(&self) {
        let now = Instant::now();
        let mut state = self.state();
        state.last_io = now;
        if state.open == 0 && state.head_started.is_none() {
            state.head_started = Some(now);
            drop(state);
            // The head deadline may come before the idle one.
            self.changed.notify_one();
        }
    }

    fn wrote(&self) {
        self.state().last_io = Instant::now();
    }

    fn request_started(self: &Arc<Self>) -> OpenRequest {
        let mut state = self.state();
        state.open += 1;
        state.head_started = None;
        OpenRequest(Arc::clone(self))
    }

    fn request_finished(&self) {
        let mut state = self.state();
        state.open -= 1;
        if state.open == 0 {
            state.idle_since = Instant::now();
        }
        drop(state);
        self.changed.notify_one();
    }

    /// The earliest deadline that applies now, and what it is for.
    fn deadline(&self) -> (Instant, Expired) {
        let state = self.state();
        let d = self.deadlines;
        if state.open > 0 {
            (state.last_io + d.stalled, Expired::Stalled)
        } else if let Some(started) = state.head_started {
            (started + d.header_read, Expired::SlowHead)
        } else {
            (state.idle_since + d.idle, Expired::Idle)
        }
    }

    /// Resolves when the connection has outlived a deadline.
    pub(super) async fn expired(&self) -> Expired {
        loop {
            let (deadline, why) = self.deadline();
            if Instant::now() >= deadline {
                return why;
            }
            // `notify_one` keeps a permit when nobody waits: no lost wake-up.
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => {}
                () = self.changed.notified() => {}
            }
        }
    }
}

/// A request in progress on a connection; finished when dropped.
#[derive(Debug)]
struct OpenRequest(Arc<Activity>);

impl Drop for OpenRequest {
    fn drop(&mut self) {
        self.0.request_finished();
    }
}

/// The socket, telling the watchdog about every byte that moves.
pub(super) struct Metered {
    stream: TcpStream,
    activity: Arc<Activity>,
}

impl Metered {
    pub(super) fn new(stream: TcpStream, activity: Arc<Activity>) -> Self {
        Self { stream, activity }
    }
}

impl AsyncRead for Metered {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.read();
        }
        polled
    }
}

impl AsyncWrite for Metered {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.wrote();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.wrote();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// The router as hyper calls it for one connection: the peer address goes
/// into the request (`ConnectInfo`, as `axum::serve` does), and the request
/// stays open for the watchdog until its response body is done.
#[derive(Clone)]
pub(super) struct ConnService {
    pub router: Router,
    /// The connection's client: its peer, or who a PROXY header named.
    pub peer: SocketAddr,
    /// A trusted balancer's `X-Forwarded-For` names each request's client.
    pub clients: super::proxy::ClientAddressing,
    pub activity: Arc<Activity>,
    /// A connection of the descriptor reserve (`super::reserve`): health
    /// checks only, each answer closing it.
    pub health_only: bool,
}

type ResponseFuture =
    Pin<Box<dyn Future<Output = Result<Response<TrackedBody>, Infallible>> + Send>>;

impl hyper::service::Service<Request<Incoming>> for ConnService {
    type Response = Response<TrackedBody>;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        if self.health_only && !super::reserve::is_health_check(request.uri().path()) {
            let open = self.activity.request_started();
            let busy =
                crate::web::error::refuse(request.uri(), &crate::error::AppError::Overloaded);
            let mut response = busy.map(|body| TrackedBody { body, _open: open });
            response.headers_mut().insert(
                http::header::CONNECTION,
                http::HeaderValue::from_static("close"),
            );
            return Box::pin(async move { Ok(response) });
        }
        let health_only = self.health_only;
        let open = self.activity.request_started();
        let mut request = request.map(Body::new);
        // Behind the PROXY protocol the header named the client; what the
        // client wrote in X-Forwarded-For is its own word.
        let client = if self.clients.proxy_protocol {
            self.peer
        } else {
            self.clients.client_of(self.peer, request.headers())
        };
        request.extensions_mut().insert(ConnectInfo(client));
        let response = self.router.clone().oneshot(request);
        Box::pin(async move {
            let mut response = response.await?;
            if health_only {
                response.headers_mut().insert(
                    http::header::CONNECTION,
                    http::HeaderValue::from_static("close"),
                );
            }
            Ok(response.map(|body| TrackedBody { body, _open: open }))
        })
    }
}

/// A response body that keeps its request open until hyper drops it.
pub(super) struct TrackedBody {
    body: Body,
    _open: OpenRequest,
}

impl HttpBody for TrackedBody {
    type Data = <Body as HttpBody>::Data;
    type Error = <Body as HttpBody>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn activity() -> Arc<Activity> {
        Activity::new(Deadlines {
            header_read: Duration::from_secs(5),
            idle: Duration::from_secs(30),
            stalled: Duration::from_secs(20),
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_connection_expires_after_the_idle_timeout() {
        let activity = activity();
        let started = Instant::now();
        assert_eq!(activity.expired().await, Expired::Idle);
        assert_eq!(started.elapsed(), Duration::from_secs(30));
    }

    #[tokio::test(start_paused = true)]
    async fn a_head_must_complete_within_the_header_timeout_of_its_first_byte() {
        let activity = activity();
        tokio::time::sleep(Duration::from_secs(10)).await;
        activity.read();
        let first_byte = Instant::now();
        assert_eq!(activity.expired().await, Expired::SlowHead);
        assert_eq!(first_byte.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn an_open_request_expires_only_when_nothing_moves() {
        let activity = activity();
        activity.read();
        let open = activity.request_started();
        tokio::time::sleep(Duration::from_secs(15)).await;
        activity.wrote();
        let last_byte = Instant::now();
        assert_eq!(activity.expired().await, Expired::Stalled);
        assert_eq!(last_byte.elapsed(), Duration::from_secs(20));
        drop(open);
        // Finished: the idle clock starts now.
        let finished = Instant::now();
        assert_eq!(activity.expired().await, Expired::Idle);
        assert_eq!(finished.elapsed(), Duration::from_secs(30));
    }
}
