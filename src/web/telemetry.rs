//! Prometheus metrics at `/metrics`, through the `metrics` facade and its
//! Prometheus exporter: purchases by outcome (orders sold, refusals by
//! reason), batch sizes and queue depths (recorded by `sale`), database pool
//! use, a latency histogram per route, and the outbox: its depth (read
//! here) and the relay's lag, sent and failed counts (recorded by
//! `outbox`); webhooks' queue depth (read here) and failures per endpoint
//! (recorded by `webhooks`).
//!
//! `/metrics` answers loopback clients only (a scraper on the same host or
//! through a local agent); buyers have no business reading it.

use std::{net::SocketAddr, sync::OnceLock, time::Instant};

use axum::{
    extract::{ConnectInfo, MatchedPath, Request, State},
    middleware::Next,
    response::{IntoResponse, Response},
};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use sqlx::PgPool;

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

/// `GET /metrics`, for loopback clients.
pub async fn render(
    State(db): State<PgPool>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
) -> Result<Response, AppError> {
    if !peer.ip().is_loopback() {
        return Err(AppError::NotFound);
    }
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
/// series each) and status class.
pub async fn track(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |p| p.as_str())
        .to_owned();
    let method = request.method().as_str().to_owned();
    let started = Instant::now();
    let response = next.run(request).await;
    let status = match response.status().as_u16() {
        100..=399 => "ok",
        400..=499 => "4xx",
        _ => "5xx",
    };
    metrics::histogram!(
        "stampede_http_request_duration_seconds",
        "route" => route,
        "method" => method,
        "status" => status,
    )
    .record(started.elapsed().as_secs_f64());
    response
}
