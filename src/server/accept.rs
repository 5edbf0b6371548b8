//! The accept loop: per-address connection caps, the descriptor reserve,
//! the PROXY header of a balancer, deadlines on every connection, and
//! graceful shutdown.

use std::{future::Future, net::SocketAddr};

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    server::graceful::GracefulShutdown,
};
use tokio::{
    net::{TcpListener, TcpStream},
    sync::mpsc,
};

use super::{
    ConnLimits, MAX_HEAD_BYTES,
    connection::{Activity, ConnService, Metered},
    descriptors,
    proxy::ClientAddressing,
    reserve,
};
use crate::web::per_client::PerClient;

/// Connections whose PROXY header is being read at once, at most: each
/// waits at most the header timeout.
const READING_PROXY_HEADERS: usize = 1024;

/// Serve `app` on `listener` until `shutdown` resolves, then stop accepting
/// and let open requests finish (closing idle connections at once).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()>,
) {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        // A backstop: hyper's timer runs from the moment it waits for a
        // head (idle time included); the watchdog is stricter.
        .header_read_timeout(limits.idle_timeout + limits.header_read_timeout)
        .max_buf_size(MAX_HEAD_BYTES);
    let per_ip = PerClient::new(limits.max_connections_per_ip);
    let seats = reserve::Seats::new(limits.max_connections);
    let deadlines = limits.deadlines();
    let clients = limits.clients.clone();
    let graceful = GracefulShutdown::new();
    let mut accept_errors = descriptors::AcceptErrors::new();
    // Connections whose client a PROXY header named, read off the loop.
    let (proxied_tx, mut proxied) = mpsc::channel::<(TcpStream, SocketAddr)>(64);
    let reading = std::sync::Arc::new(tokio::sync::Semaphore::new(READING_PROXY_HEADERS));
    tokio::pin!(shutdown);
    loop {
        let (stream, client) = tokio::select! {
            biased;
            () = &mut shutdown => break,
            Some(named) = proxied.recv() => named,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    accept_errors.recovered();
                    if !clients.proxy_protocol {
                        (stream, peer)
                    } else {
                        read_proxy_header(stream, peer, &limits, &reading, &proxied_tx).await;
                        continue;
                    }
                }
                Err(err) => {
                    accept_errors.handle(&listener, err).await;
                    continue;
                }
            },
        };
        // A trusted balancer's connections (without the PROXY protocol)
        // carry many clients each: they are not capped per address; each
        // request's client is (`ConnService`).
        let slot = if !clients.proxy_protocol && clients.trusts(client.ip()) {
            None
        } else {
            match per_ip.try_acquire(client.ip()) {
                Some(slot) => Some(slot),
                None => {
                    tracing::debug!(%client, "refused a connection: too many from this address");
                    descriptors::refuse(stream, "Too many connections from your address.").await;
                    continue;
                }
            }
        };
        // Past the site's cap, the reserve: health checks only.
        let Some((seat, health_only)) = seats.take() else {
            descriptors::refuse(stream, "Stampede is very busy right now; please try again.").await;
            continue;
        };
        if let Err(err) = stream.set_nodelay(true) {
            tracing::debug!(%err, "cannot set TCP_NODELAY");
        }
        let activity = Activity::new(deadlines.of(health_only));
        let service = ConnService {
            router: app.clone(),
            peer: client,
            clients: clients.clone(),
            activity: activity.clone(),
            health_only,
        };
        let io = TokioIo::new(Metered::new(stream, activity.clone()));
        let connection = graceful.watch(builder.serve_connection(io, service));
        tokio::spawn(async move {
            tokio::select! {
                result = connection => {
                    if let Err(err) = result {
                        tracing::debug!(%client, %err, "connection ended with an error");
                    }
                }
                why = activity.expired() => {
                    tracing::debug!(%client, ?why, "closed a connection past its deadline");
                }
            }
            drop((slot, seat));
        });
    }
    drop(listener);
    tracing::info!(
        connections = graceful.count(),
        "shutting down: finishing in-flight requests"
    );
    // Open requests end within the request timeout, heads within the
    // header timeout; after that, whatever is left is dropped.
    let grace = limits.request_timeout + limits.header_read_timeout;
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("grace period over: closing the remaining connections");
    }
}

/// On a listener that requires the PROXY protocol: a peer that is not a
/// trusted balancer (when some are named) is closed at once; otherwise its
/// header is read off the accept loop, within the header timeout, and the
/// connection comes back with the client it names. One without a valid
/// header is closed: it did not come through the balancer.
async fn read_proxy_header(
    mut stream: TcpStream,
    peer: SocketAddr,
    limits: &ConnLimits,
    reading: &std::sync::Arc<tokio::sync::Semaphore>,
    proxied: &mpsc::Sender<(TcpStream, SocketAddr)>,
) {
    let clients = &limits.clients;
    if !clients.trusted.is_empty() && !clients.trusts(peer.ip()) {
        tracing::debug!(%peer, "refused a connection: not a trusted balancer");
        return;
    }
    let Ok(permit) = reading.clone().try_acquire_owned() else {
        descriptors::refuse(stream, "Stampede is very busy right now; please try again.").await;
        return;
    };
    let within = limits.header_read_timeout;
    let proxied = proxied.clone();
    tokio::spawn(async move {
        let _permit = permit;
        match ClientAddressing::read_proxy_header(&mut stream, peer, within).await {
            Ok(client) => {
                let _ = proxied.send((stream, client)).await;
            }
            Err(err) => tracing::debug!(%peer, %err, "closed a connection without a PROXY header"),
        }
    });
}
