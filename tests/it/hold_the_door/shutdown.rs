//! SIGTERM: idle connections close, open purchases finish and are answered.

use super::*;

#[sqlx::test]
async fn sigterm_closes_idle_connections_and_lets_an_open_purchase_finish(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, tt, server) = event_and_server(&connect, &[], None).await;
    let health = format!("GET /healthz HTTP/1.1\r\nhost: {}\r\n\r\n", server.addr);
    let mut idle = connections(&server, loopback(31), 5, health.as_bytes()).await;

    // A purchase whose body is half sent when SIGTERM arrives.
    let body = json!({
        "ticket_type_id": tt, "quantity": 1,
        "email": "last@example.org", "idempotency_key": Uuid::new_v4().to_string(),
    })
    .to_string();
    let (first, rest) = body.split_at(body.len() / 2);
    let mut buying = connect_from(loopback(32), server.addr).await;
    send(&mut buying, purchase_head(&server, body.len()).as_bytes()).await;
    send(&mut buying, first.as_bytes()).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.terminate();

    let idle = endings(&mut idle, CLOSES_WITHIN).await;
    assert!(
        idle.iter().all(|e| *e
            == Ending {
                status: Some(200),
                closed: true
            }),
        "idle keep-alives are closed at once: {idle:?}"
    );
    send(&mut buying, rest.as_bytes()).await;
    let end = ending(&mut buying, CLOSES_WITHIN).await;
    assert_eq!(
        end,
        Ending {
            status: Some(201),
            closed: true
        }
    );
    server.wait_for_clean_exit();
    assert_eq!(common::order_count(&pool).await, 1);
    assert_invariants(&pool).await;
    pool.close().await;
}

/// Graceful shutdown in the middle of a burst: purchases are queued on the
/// hot row (held by the test) when SIGTERM arrives; the row is released
/// only once the server has stopped accepting. Each purchase is then either
/// committed and answered 201, or answered otherwise (or not at all) and not
/// written; the invariants hold and the process exits 0.
#[sqlx::test]
async fn sigterm_during_a_burst_answers_every_committed_purchase(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (pool, tt, server) = event_and_server(&connect, &[], None).await;
    let hold = common::locks::hold_ticket_type(&pool, tt).await;
    let buyers: Vec<_> = (0..16)
        .map(|i| {
            let key = Uuid::new_v4().to_string();
            let email = format!("burst{i}@example.org");
            let request = client_from(loopback(40 + i)).post(server.url("/api/v1/orders")).json(
                &json!({"ticket_type_id": tt, "quantity": 1, "email": email, "idempotency_key": key}),
            );
            let buying = tokio::spawn(async move {
                match request.send().await {
                    Ok(resp) => Some(resp.status().as_u16()),
                    Err(_) => None,
                }
            });
            (email, key, buying)
        })
        .collect();
    // In flight for certain: queued on the held row (the engine's batch
    // waits for it in its `SELECT ... FOR UPDATE`).
    common::locks::wait_until_blocked(&pool, "SELECT event_id, remaining", 1).await;
    server.terminate();
    // Shutdown has begun once the listener is closed.
    let mut closed = false;
    for _ in 0..1000 {
        if TcpStream::connect(server.addr).await.is_err() {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(closed, "the server kept accepting after SIGTERM");
    hold.tx.commit().await.unwrap();

    let mut answered = 0;
    for (email, key, buying) in buyers {
        let status = buying.await.unwrap();
        let written: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM orders WHERE email = $1 AND idempotency_key = $2",
        )
        .bind(&email)
        .bind(&key)
        .fetch_one(&pool)
        .await
        .unwrap();
        match status {
            Some(201) => {
                answered += 1;
                assert_eq!(written, 1, "{email} was told 201 and has no order");
            }
            other => assert_eq!(written, 0, "{email} got {other:?} and has an order"),
        }
    }
    eprintln!("{answered} of 16 purchases committed and answered across SIGTERM");
    assert!(answered >= 1, "no purchase in flight was let finish");
    server.wait_for_clean_exit();
    assert_eq!(common::order_count(&pool).await, answered);
    assert_invariants(&pool).await;
    pool.close().await;
}
