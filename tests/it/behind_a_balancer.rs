//! Per-address limits behind a load balancer (issue 37): through a real
//! HAProxy, two client addresses (127.0.0.2 and 127.0.0.3) are limited
//! separately, whether HAProxy names the client by the PROXY protocol v2
//! or by `X-Forwarded-For`; a forged `X-Forwarded-For` from a peer that is
//! not a trusted proxy changes nothing; a listener that requires the PROXY
//! protocol closes a connection without it.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

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
