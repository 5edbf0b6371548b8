//! Per-address limits behind a load balancer (issue 37): through a real
//! HAProxy, two client addresses (127.0.0.2 and 127.0.0.3) are limited
//! separately, whether HAProxy names the client by the PROXY protocol v2
//! or by `X-Forwarded-For`; a forged `X-Forwarded-For` from a peer that is
//! not a trusted proxy changes nothing; a listener that requires the PROXY
//! protocol closes a connection without it. And an instance SIGKILLed in
//! the middle of a rush through HAProxy loses no order.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use futures::StreamExt as _;
use serde_json::json;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use uuid::Uuid;

use crate::common::{
    TicketSpec, assert_invariants, database_url,
    haproxy::{Forwarding, Haproxy},
    pool,
    process::{ServerProcess, client_from, connect_from, loopback},
    published_event,
    purchase::fresh_key,
};

/// Two purchases per client address, then 429 for the next ten minutes.
const LIMITS: [&str; 6] = [
    "--purchase-burst-per-ip",
    "2",
    "--purchase-period-ms",
    "600000",
    "--purchase-burst-per-email",
    "0",
];

/// A purchase of one ticket by a new buyer; its status.
async fn buy(
    client: &reqwest::Client,
    url: &str,
    ticket_type: Uuid,
    forwarded_for: Option<&str>,
) -> u16 {
    let mut request = client.post(url).json(&json!({
        "ticket_type_id": ticket_type,
        "quantity": 1,
        "email": format!("{}@example.org", Uuid::new_v4()),
        "idempotency_key": fresh_key(),
    }));
    if let Some(forwarded) = forwarded_for {
        request = request.header("x-forwarded-for", forwarded);
    }
    request.send().await.unwrap().status().as_u16()
}

async fn two_addresses_are_limited_apart(connect: PgConnectOptions, forwarding: Forwarding) {
    let pool = pool(connect.clone(), 5).await;
    let fixture = published_event(&pool, &[TicketSpec::new(100, 1, 1)]).await;
    let tt = fixture.ticket_type_id();
    let mut args = LIMITS.to_vec();
    args.extend(["--trusted-proxies", "127.0.0.1/32"]);
    if matches!(forwarding, Forwarding::ProxyProtocol) {
        args.push("--proxy-protocol");
    }
    let server = ServerProcess::start(&database_url(&connect), &args).await;
    let balancer = Haproxy::start(&[server.addr], forwarding).await;
    let orders = balancer.url("/api/v1/orders");
    let (a, b) = (client_from(loopback(2)), client_from(loopback(3)));
    // The first address spends its two purchases; the third is refused.
    assert_eq!(buy(&a, &orders, tt, None).await, 201);
    assert_eq!(buy(&a, &orders, tt, None).await, 201);
    assert_eq!(buy(&a, &orders, tt, None).await, 429, "{forwarding:?}");
    // The second address has its own two, through the same balancer (all
    // connections to the instance come from HAProxy's 127.0.0.1).
    assert_eq!(buy(&b, &orders, tt, None).await, 201, "{forwarding:?}");
    assert_eq!(buy(&b, &orders, tt, Some("10.9.9.9")).await, 201);
    // What a client writes in X-Forwarded-For is not its address: HAProxy
    // appends the real one, which Stampede reads from the right.
    assert_eq!(buy(&b, &orders, tt, Some("10.9.9.9")).await, 429);
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn behind_haproxy_with_the_proxy_protocol_each_client_address_is_limited_apart(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    two_addresses_are_limited_apart(connect, Forwarding::ProxyProtocol).await;
}

#[sqlx::test]
async fn behind_haproxy_with_forwarded_for_each_client_address_is_limited_apart(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    two_addresses_are_limited_apart(connect, Forwarding::ForwardedFor).await;
}

#[sqlx::test]
async fn a_forged_forwarded_for_from_an_untrusted_peer_changes_nothing(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect.clone(), 5).await;
    let fixture = published_event(&pool, &[TicketSpec::new(100, 1, 1)]).await;
    let tt = fixture.ticket_type_id();
    let mut args = LIMITS.to_vec();
    args.extend(["--trusted-proxies", "127.0.0.1/32"]);
    let server = ServerProcess::start(&database_url(&connect), &args).await;
    let orders = server.url("/api/v1/orders");
    // 127.0.0.2 is no proxy of ours: a new "client" per request is ignored.
    let stranger = client_from(loopback(2));
    for (i, expected) in [201, 201, 429, 429].into_iter().enumerate() {
        let forged = format!("198.51.100.{i}");
        assert_eq!(
            buy(&stranger, &orders, tt, Some(&forged)).await,
            expected,
            "{i}"
        );
    }
    // The trusted proxy's word is taken: each named client has its own.
    let proxy = client_from(loopback(1));
    for forwarded in ["203.0.113.1", "203.0.113.1", "203.0.113.2"] {
        assert_eq!(
            buy(&proxy, &orders, tt, Some(forwarded)).await,
            201,
            "{forwarded}"
        );
    }
    assert_eq!(buy(&proxy, &orders, tt, Some("203.0.113.1")).await, 429);
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn a_listener_that_requires_the_proxy_protocol_closes_a_connection_without_it(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let server = ServerProcess::start(
        &database_url(&connect),
        &["--proxy-protocol", "--trusted-proxies", "127.0.0.1/32"],
    )
    .await;
    // From the trusted address but without the header; and from another.
    for from in [1, 2] {
        let mut stream = connect_from(loopback(from), server.addr).await;
        let _ = stream
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            .await;
        let mut answer = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
            .await
            .expect("the connection is closed");
        assert!(
            read.is_err() || !String::from_utf8_lossy(&answer).contains("200 OK"),
            "127.0.0.{from} was served without a PROXY header: {}",
            String::from_utf8_lossy(&answer)
        );
    }
}

/// What one buyer ended with: the order they were told of, or a refusal
/// (sold out); and their attempts' latencies and failures.
struct Outcome {
    email: String,
    key: String,
    order: Option<String>,
    failures: Vec<std::time::Instant>,
    latencies: Vec<Duration>,
}

/// One buyer through the balancer, retrying with the same idempotency key
/// after a failure (a 5xx, a dropped connection) until they get an answer.
async fn buyer_until_answered(
    client: reqwest::Client,
    url: String,
    ticket_type: Uuid,
    i: usize,
) -> Outcome {
    let (email, key) = (format!("rush{i}@example.org"), fresh_key());
    let mut outcome = Outcome {
        email,
        key,
        order: None,
        failures: Vec::new(),
        latencies: Vec::new(),
    };
    for _ in 0..100 {
        let started = std::time::Instant::now();
        let response = client
            .post(&url)
            .json(&json!({
                "ticket_type_id": ticket_type, "quantity": 1,
                "email": outcome.email, "idempotency_key": outcome.key,
            }))
            .timeout(Duration::from_secs(20))
            .send()
            .await;
        outcome.latencies.push(started.elapsed());
        match response {
            Ok(response) if matches!(response.status().as_u16(), 200 | 201) => {
                let body: serde_json::Value = response.json().await.unwrap();
                outcome.order = Some(body["id"].as_str().unwrap().to_owned());
                return outcome;
            }
            // Sold out: an answer too.
            Ok(response) if response.status().as_u16() == 409 => return outcome,
            Ok(response) => {
                let status = response.status().as_u16();
                assert!(
                    status >= 500,
                    "a refusal other than sold out or a failure: {status}"
                );
                outcome.failures.push(std::time::Instant::now());
            }
            Err(_) => outcome.failures.push(std::time::Instant::now()),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{} got no answer in 100 attempts", outcome.email);
}

/// A fault to one of the instances in the middle of a rush.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    /// SIGKILL: it ends at once, whatever it was doing.
    Kill,
    /// SIGTERM, with `--drain-secs 2`: `/readyz` fails first, so HAProxy
    /// takes it out, then it stops.
    Stop,
}

/// Three instances behind HAProxy (PROXY protocol, health checks on
/// `/readyz` every 200 ms), a rush of 1,500 buyers for 1,000 tickets, and
/// `fault` to one instance in the middle. Every buyer, retrying with their
/// key after a failure, ends with their one order or sold out; every
/// answered order is committed and every committed one was answered;
/// nothing is oversold. Returns the attempts that failed and how long after
/// the fault the last one did.
async fn rush_through_haproxy(connect: PgConnectOptions, fault: Fault) -> (usize, Duration) {
    let pool = pool(connect.clone(), 5).await;
    let fixture = published_event(&pool, &[TicketSpec::new(1000, 1, 1)]).await;
    let tt = fixture.ticket_type_id();
    let url = database_url(&connect);
    let args = [
        "--proxy-protocol",
        "--trusted-proxies",
        "127.0.0.1/32",
        "--purchase-burst-per-ip",
        "0",
        "--purchase-burst-per-email",
        "0",
        "--drain-secs",
        "2",
    ];
    let mut instances = Vec::new();
    for _ in 0..3 {
        instances.push(ServerProcess::start(&url, &args).await);
    }
    let addrs: Vec<_> = instances.iter().map(|i| i.addr).collect();
    let balancer = Haproxy::start(&addrs, Forwarding::ProxyProtocol).await;
    let client = client_from(loopback(7));
    let orders = balancer.url("/api/v1/orders");
    let rush = tokio::spawn(
        futures::stream::iter(0..1500)
            .map(move |i| buyer_until_answered(client.clone(), orders.clone(), tt, i))
            .buffer_unordered(48)
            .collect::<Vec<_>>(),
    );
    // The fault, once the rush is under way.
    for _ in 0..4000 {
        if crate::common::order_count(&pool).await >= 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let faulted_at = std::time::Instant::now();
    match fault {
        Fault::Kill => instances[0].kill(),
        Fault::Stop => instances[0].terminate(),
    }
    let outcomes = rush.await.unwrap();
    // A stopped instance ends by itself, after its drain.
    for _ in 0..200 {
        if !instances[0].is_running() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !instances[0].is_running(),
        "the instance still runs after its {fault:?}"
    );

    // Every answered order is committed, with the buyer's key; every
    // committed order was answered; each buyer has at most one.
    let committed: Vec<(String, String, Uuid)> = sqlx::query_as(
        "SELECT email, idempotency_key, id FROM orders WHERE ticket_type_id = $1 AND status = 'confirmed'",
    )
    .bind(tt)
    .fetch_all(&pool)
    .await
    .unwrap();
    let committed: std::collections::BTreeMap<(String, String), String> = committed
        .into_iter()
        .map(|(email, key, id)| ((email, key), id.to_string()))
        .collect();
    let answered: std::collections::BTreeMap<(String, String), String> = outcomes
        .iter()
        .filter_map(|o| Some(((o.email.clone(), o.key.clone()), o.order.clone()?)))
        .collect();
    assert_eq!(answered, committed, "answered and committed orders differ");
    assert_eq!(committed.len(), 1000, "the rush sold out");
    assert_invariants(&pool).await;

    // The error window: failures after the fault, and the p99 around it.
    let failures: Vec<_> = outcomes
        .iter()
        .flat_map(|o| o.failures.iter().copied())
        .collect();
    let last_failure = failures.iter().filter(|at| **at >= faulted_at).max();
    let window = last_failure.map_or(Duration::ZERO, |at| at.duration_since(faulted_at));
    let mut latencies: Vec<_> = outcomes
        .iter()
        .flat_map(|o| o.latencies.iter().copied())
        .collect();
    latencies.sort();
    let p99 = latencies[latencies.len() * 99 / 100];
    eprintln!(
        "{fault:?} mid-rush behind HAProxy: {} failed attempts (retried with the same key), \
         the last {window:?} after the fault; p99 of all {} attempts {p99:?}",
        failures.len(),
        latencies.len()
    );
    drop(balancer);
    (failures.len(), window)
}

#[sqlx::test]
async fn an_instance_killed_mid_rush_behind_haproxy_loses_no_order(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (_, window) = rush_through_haproxy(connect, Fault::Kill).await;
    // Only the requests in flight on the killed instance fail: HAProxy
    // sends a refused connection to another at once, and its checks (every
    // 200 ms, down after 2) take the instance out (a margin for a shared
    // machine).
    assert!(
        window < Duration::from_secs(2),
        "failures went on for {window:?}"
    );
}

#[sqlx::test]
async fn an_instance_stopped_mid_rush_behind_haproxy_fails_no_request(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (failures, _) = rush_through_haproxy(connect, Fault::Stop).await;
    assert_eq!(failures, 0, "a graceful stop failed requests");
}

/// A connection from the balancer (127.0.0.1) whose PROXY v2 header names
/// `client` (TCP over IPv4).
async fn proxied_from(server: &ServerProcess, client: [u8; 4]) -> tokio::net::TcpStream {
    let mut stream = connect_from(loopback(1), server.addr).await;
    let mut header = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    header.extend_from_slice(&[0x21, 0x11, 0, 12]);
    header.extend_from_slice(&client);
    header.extend_from_slice(&[127, 0, 0, 1]);
    header.extend_from_slice(&50_000_u16.to_be_bytes());
    header.extend_from_slice(&server.addr.port().to_be_bytes());
    stream.write_all(&header).await.unwrap();
    stream
}

/// The first response's status on a connection kept open.
async fn health_status(stream: &mut tokio::net::TcpStream) -> Option<u16> {
    let _ = stream
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await;
    let mut seen = [0_u8; 512];
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut seen))
        .await
        .ok()?
        .ok()?;
    crate::common::process::status_of(&seen[..read])
}

/// Behind the PROXY protocol the connection cap counts the clients the
/// headers name, not the balancer every connection comes from.
#[sqlx::test]
async fn behind_the_proxy_protocol_the_connection_cap_counts_the_named_clients(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let server = ServerProcess::start(
        &database_url(&connect),
        &[
            "--proxy-protocol",
            "--trusted-proxies",
            "127.0.0.1/32",
            "--max-connections-per-ip",
            "2",
        ],
    )
    .await;
    // Two connections of 10.0.0.2, served and kept open.
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut stream = proxied_from(&server, [10, 0, 0, 2]).await;
        assert_eq!(health_status(&mut stream).await, Some(200));
        held.push(stream);
    }
    // A third of the same client is refused...
    let mut third = proxied_from(&server, [10, 0, 0, 2]).await;
    assert_eq!(health_status(&mut third).await, Some(503));
    // ... while another client, through the same balancer, is served.
    let mut other = proxied_from(&server, [10, 0, 0, 3]).await;
    assert_eq!(health_status(&mut other).await, Some(200));
    drop(held);
}
