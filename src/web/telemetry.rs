//! Prometheus metrics at `/metrics`, through the `metrics` facade and its
//! Prometheus exporter: purchases by outcome (orders sold, refusals by
//! reason), batch sizes and queue depths (recorded by `sale`), database pool
//! use, a latency histogram per route, and the outbox: its depth (read
//! here) and the relay's lag, sent and failed counts (recorded by
//! `outbox`); webhooks' queue depth (read here) and failures per endpoint
//! (recorded by `webhooks`).
//!
//! `/metrics` is not a route of the site: it is served by [`metrics_app`]
//! on a listener of its own (`--metrics-listen`, off unless given), so that
//! a reverse proxy in front of the site cannot expose it. No label names an
//! object (an event, a ticket type, an endpoint): route patterns, methods,
//! outcomes and states only.

use std::{
    collections::HashMap,
    future::Future,
    pin::Pin,
    sync::{Arc, LazyLock, OnceLock, PoisonError, RwLock},
    task::{Context, Poll, ready},
    time::Instant,
};

use axum::{
    Router,
    extract::{MatchedPath, State},
    response::{IntoResponse, Response},
    routing::get,
};
use http::Method;
use metrics::Histogram;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use pin_project_lite::pin_project;
use sqlx::PgPool;
use tower::{Layer, Service};

use crate::error::AppError;

/// Seconds: from a cached page (well under a millisecond) to a request
/// timeout.
const LATENCY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0,
];

/// The process's recorder: installed once, by the first app built.
pub fn recorder() -> Option<&'static PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets(&LATENCY_BUCKETS)
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        metrics_exporter_prometheus::Matcher::Full("stampede_batch_size".into()),
                        &[
                            1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
                        ],
                    )
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        metrics_exporter_prometheus::Matcher::Full(
                            "stampede_outbox_lag_seconds".into(),
                        ),
                        &[
                            0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                            60.0, 300.0,
                        ],
                    )
                });
            match builder.map(PrometheusBuilder::install_recorder) {
                Ok(Ok(handle)) => Some(handle),
                Ok(Err(err)) => {
                    tracing::warn!(error = %err, "metrics recorder not installed");
                    None
                }
                Err(err) => {
                    tracing::warn!(error = %err, "metrics buckets refused");
                    None
                }
            }
        })
        .as_ref()
}

/// The metrics' own app, for the listener `--metrics-listen` names:
/// `GET /metrics` and nothing else (any other path is 404).
pub fn metrics_app(db: PgPool) -> Router {
    Router::new()
        .route("/metrics", get(render))
        .fallback(super::error::not_found)
        .with_state(db)
}

/// `GET /metrics` on the metrics listener.
async fn render(State(db): State<PgPool>) -> Result<Response, AppError> {
    let handle = recorder().ok_or(AppError::NotFound)?;
    let in_use = db.size() as f64 - db.num_idle() as f64;
    metrics::gauge!("stampede_db_pool_connections", "state" => "in_use").set(in_use);
    metrics::gauge!("stampede_db_pool_connections", "state" => "idle").set(db.num_idle() as f64);
    // The outbox's backlog, relay on or off: rows not yet sent and the age
    // of the oldest. A failed read leaves the last values.
    match crate::db::outbox::depth(&db).await {
        Ok((depth, oldest)) => {
            metrics::gauge!("stampede_outbox_depth").set(depth as f64);
            metrics::gauge!("stampede_outbox_oldest_seconds").set(oldest);
        }
        Err(err) => tracing::warn!(error = %err, "outbox depth unavailable"),
    }
    // Webhooks: deliveries waiting (retries included) on enabled endpoints,
    // and outbox rows not yet fanned out to them.
    match crate::db::webhooks::depth(&db).await {
        Ok((queued, unfanned)) => {
            metrics::gauge!("stampede_webhook_queue_depth").set(queued as f64);
            metrics::gauge!("stampede_webhook_fan_out_pending").set(unfanned as f64);
        }
        Err(err) => tracing::warn!(error = %err, "webhook queue depth unavailable"),
    }
    Ok((
        [(
            http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        handle.render(),
    )
        .into_response())
}

/// Latency per route (its pattern, never the raw path: ids would make a
/// series each), method and status class. A layer of its own rather than
/// `from_fn`: that boxes each request's future and clones the route's
/// service, which a rush's refusals would pay for.
#[derive(Debug, Clone, Copy, Default)]
pub struct TrackLayer;

impl<S> Layer<S> for TrackLayer {
    type Service = Track<S>;

    fn layer(&self, inner: S) -> Track<S> {
        Track { inner }
    }
}

#[derive(Debug, Clone)]
pub struct Track<S> {
    inner: S,
}

impl<S, B> Service<http::Request<B>> for Track<S>
where
    S: Service<http::Request<B>, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Tracked<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let route = request
            .extensions()
            .get::<MatchedPath>()
            .map_or("unmatched", |p| p.as_str());
        let histograms = RouteHistograms::of(route);
        let method = method_label(request.method());
        Tracked {
            inner: self.inner.call(request),
            histograms,
            method,
            started: Instant::now(),
        }
    }
}

pin_project! {
    /// A tracked request's response, timed until it is ready.
    pub struct Tracked<F> {
        #[pin]
        inner: F,
        histograms: Arc<RouteHistograms>,
        method: &'static str,
        started: Instant,
    }
}

impl<F, E> Future for Tracked<F>
where
    F: Future<Output = Result<Response, E>>,
{
    type Output = Result<Response, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = ready!(this.inner.poll(cx));
        if let Ok(response) = &result {
            let status = match response.status().as_u16() {
                100..=399 => StatusClass::Ok,
                400..=499 => StatusClass::ClientError,
                _ => StatusClass::ServerError,
            };
            this.histograms
                .get(this.method, status)
                .record(this.started.elapsed().as_secs_f64());
        }
        Poll::Ready(result)
    }
}

/// A request's method as a label: the standard ones by name, any other
/// `other`, so that made-up methods cannot add series.
fn method_label(method: &Method) -> &'static str {
    const KNOWN: [Method; 9] = [
        Method::GET,
        Method::POST,
        Method::PUT,
        Method::DELETE,
        Method::PATCH,
        Method::HEAD,
        Method::OPTIONS,
        Method::CONNECT,
        Method::TRACE,
    ];
    KNOWN
        .iter()
        .find(|known| *known == method)
        .map_or("other", Method::as_str)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StatusClass {
    Ok,
    ClientError,
    ServerError,
}

impl StatusClass {
    fn label(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::ClientError => "4xx",
            Self::ServerError => "5xx",
        }
    }
}

/// One route's latency histograms by method and status class, kept at
/// hand: building the metric's key and finding it in the registry cost
/// every request more than the recording.
pub struct RouteHistograms {
    route: Arc<str>,
    histograms: RwLock<Vec<(&'static str, StatusClass, Histogram)>>,
}

/// Every route's, by pattern (a bounded set: the router's patterns).
type ByRoute = HashMap<Arc<str>, Arc<RouteHistograms>, foldhash::fast::RandomState>;
static ROUTES: LazyLock<RwLock<ByRoute>> = LazyLock::new(Default::default);

impl RouteHistograms {
    fn of(route: &str) -> Arc<Self> {
        if let Some(known) = ROUTES
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(route)
        {
            return Arc::clone(known);
        }
        let route: Arc<str> = route.into();
        let histograms = Arc::new(Self {
            route: Arc::clone(&route),
            histograms: RwLock::default(),
        });
        Arc::clone(
            ROUTES
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(route)
                .or_insert(histograms),
        )
    }

    fn get(&self, method: &'static str, status: StatusClass) -> Histogram {
        let known = self
            .histograms
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|(m, s, _)| *s == status && crate::metric_handles::same_label(m, method))
            .map(|(_, _, histogram)| histogram.clone());
        known.unwrap_or_else(|| {
            let histogram = metrics::histogram!(
                "stampede_http_request_duration_seconds",
                "route" => self.route.to_string(),
                "method" => method,
                "status" => status.label(),
            );
            self.histograms
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .push((method, status, histogram.clone()));
            histogram
        })
    }
}
