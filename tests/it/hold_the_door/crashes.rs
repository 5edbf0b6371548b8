//! SIGKILL and a Postgres restart mid-burst: nothing committed is lost.

use super::*;

/// The fault of issue 7: the app SIGKILLed in the middle of a burst. Every
/// order it committed is found by replaying its key on a new process (same
/// order, 200), every buyer it told 201 has that order, and no order is
/// half-written (each has all its tickets, the books add up).
#[sqlx::test]
async fn sigkill_during_a_burst_loses_no_committed_order(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = common::pool(connect.clone(), 4).await;
    let fixture = published_event(&pool, &[TicketSpec::new(10_000, 2, 2)]).await;
    let tt = fixture.ticket_type_id();
    let url = database_url(&connect);
    let loopback_burst = ["--purchase-burst-per-ip", "0"];
    let server = ServerProcess::start(&url, &loopback_burst).await;

    let client = client_from(loopback(60));
    let requests: Vec<_> = (0..2_000)
        .map(|i| {
            let buyer = (format!("killed{i}@example.org"), Uuid::new_v4().to_string());
            let request = client
                .post(server.url("/api/v1/orders"))
                .json(&purchase_body(tt, &buyer));
            (buyer, request)
        })
        .collect();
    let burst = tokio::spawn(
        futures::stream::iter(requests)
            .map(|(buyer, request)| async move {
                let resp = request.send().await.ok()?;
                if resp.status() != 201 {
                    return None;
                }
                let order: serde_json::Value = resp.json().await.ok()?;
                Some((buyer, order["id"].as_str()?.to_owned()))
            })
            .buffer_unordered(32)
            .collect::<Vec<_>>(),
    );

    // Kill it once some orders are in, while others are in flight.
    for _ in 0..2_000 {
        if common::order_count(&pool).await >= 50 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    drop(server); // SIGKILL
    let told_created: Vec<((String, String), String)> =
        burst.await.unwrap().into_iter().flatten().collect();
    let committed = common::order_count(&pool).await;
    assert!(
        committed >= 50,
        "killed before the burst began ({committed} orders)"
    );
    assert!(committed < 2_000, "the burst ended before the kill");

    // Nothing half-written: every order has all its tickets; the books add up.
    let incomplete: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM orders o
         WHERE o.quantity <> (SELECT count(*) FROM tickets t WHERE t.order_id = o.id)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(incomplete, 0, "orders without all their tickets");
    assert_invariants(&pool).await;

    // Every buyer told 201 has that very order.
    for ((email, key), id) in &told_created {
        let stored: Option<Uuid> =
            sqlx::query_scalar("SELECT id FROM orders WHERE email = $1 AND idempotency_key = $2")
                .bind(email)
                .bind(key)
                .fetch_optional(&pool)
                .await
                .unwrap();
        assert_eq!(stored.map(|u| u.to_string()).as_deref(), Some(id.as_str()));
    }

    // A new process replays every committed order by its key.
    let restarted = ServerProcess::start(&url, &loopback_burst).await;
    let stored: Vec<(String, String, Uuid)> =
        sqlx::query_as("SELECT email, idempotency_key, id FROM orders WHERE ticket_type_id = $1")
            .bind(tt)
            .fetch_all(&pool)
            .await
            .unwrap();
    let replay_client = client_from(loopback(61));
    for (email, key, id) in &stored {
        let resp = replay_client
            .post(restarted.url("/api/v1/orders"))
            .json(&purchase_body(tt, &(email.clone(), key.clone())))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{email} did not replay");
        let order: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(order["id"], id.to_string());
    }
    eprintln!(
        "{committed} orders committed before SIGKILL, {} of them answered 201; all replayed",
        told_created.len()
    );
    assert_eq!(common::order_count(&pool).await, committed);
    restarted.stop();
    pool.close().await;
}

/// The fault of issue 7: Postgres crashes and restarts in the middle of a
/// burst (a private cluster, stopped with `-m immediate`). Purchases fail
/// cleanly with 503 and `Retry-After`, none hangs past its deadline, the
/// app's pool recovers by itself (buyers get 201 again from the same
/// process), every buyer told 201 has that order, a buyer told 503 who
/// retries with the same key ends with exactly one order, and the
/// invariants hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restarted_during_a_burst_fails_cleanly_and_recovers() {
    let cluster = common::cluster::PrivateCluster::start();
    let admin = common::pool(cluster.url("postgres").parse().unwrap(), 2).await;
    sqlx::query("CREATE DATABASE stampede")
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
    let url = cluster.url("stampede");
    // The server migrates the database as it starts.
    const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
    let server = ServerProcess::start(
        &url,
        &[
            "--purchase-burst-per-ip",
            "0",
            "--request-timeout-secs",
            "5",
            "--db-acquire-timeout-ms",
            "1000",
        ],
    )
    .await;
    let pool = common::pool(url.parse().unwrap(), 2).await;
    let tt = published_event(&pool, &[TicketSpec::new(100_000, 2, 2)])
        .await
        .ticket_type_id();
    pool.close().await;

    // 32 buyers in closed loop until told to stop, each a new buyer per
    // attempt; every answer is timed against the deadline.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..32)
        .map(|worker| {
            let client = client_from(loopback(70));
            let endpoint = server.url("/api/v1/orders");
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut heard = Vec::new();
                let mut attempt = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    attempt += 1;
                    let buyer = (
                        format!("restart{worker}-{attempt}@example.org"),
                        Uuid::new_v4().to_string(),
                    );
                    let request = client.post(&endpoint).json(&purchase_body(tt, &buyer));
                    // The deadline, plus slack for a shared machine.
                    let answer = timeout(REQUEST_TIMEOUT + SUCCEEDS_WITHIN, request.send()).await;
                    let outcome = match answer {
                        Err(_) => Heard::Other("no answer within the deadline".into()),
                        Ok(Err(error)) => Heard::Other(format!("no answer: {error}")),
                        Ok(Ok(resp)) if resp.status() == 201 => {
                            let order: serde_json::Value = resp.json().await.unwrap();
                            Heard::Created(order["id"].as_str().unwrap().to_owned())
                        }
                        Ok(Ok(resp))
                            if resp.status() == 503
                                && resp.headers().contains_key("retry-after") =>
                        {
                            Heard::Overloaded
                        }
                        Ok(Ok(resp)) => Heard::Other(format!(
                            "{} {}",
                            resp.status(),
                            resp.text().await.unwrap_or_default()
                        )),
                    };
                    heard.push((buyer, outcome, Instant::now()));
                }
                heard
            })
        })
        .collect();

    let orders_in_cluster = || async {
        let pool = common::pool(url.parse().unwrap(), 1).await;
        let count = common::order_count(&pool).await;
        pool.close().await;
        count
    };
    // Crash once orders are flowing; restart after a 2 s outage.
    let began = Instant::now();
    while orders_in_cluster().await < 100 {
        assert!(
            began.elapsed() < Duration::from_secs(60),
            "no orders in 60 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cluster.crash_server();
    tokio::time::sleep(Duration::from_secs(2)).await;
    cluster.start_server();
    let restarted = Instant::now();
    // Let the burst run on until the app has sold again for a while.
    tokio::time::sleep(Duration::from_secs(5)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let heard: Vec<_> = join_all(workers)
        .await
        .into_iter()
        .flat_map(Result::unwrap)
        .collect();

    let others: Vec<_> = heard
        .iter()
        .filter_map(|(buyer, outcome, _)| match outcome {
            Heard::Other(what) => Some(format!("{}: {what}", buyer.0)),
            _ => None,
        })
        .collect();
    assert!(
        others.is_empty(),
        "answers other than 201 or 503: {others:?}"
    );
    let overloaded: Vec<_> = heard
        .iter()
        .filter(|(_, outcome, _)| matches!(outcome, Heard::Overloaded))
        .map(|(buyer, _, _)| buyer.clone())
        .collect();
    assert!(!overloaded.is_empty(), "the outage was never seen: no 503");
    let created_after_restart = heard
        .iter()
        .filter(|(_, outcome, at)| matches!(outcome, Heard::Created(_)) && *at > restarted)
        .count();
    assert!(
        created_after_restart > 0,
        "the app's pool did not recover: no 201 after the restart"
    );
    let ready = client_from(loopback(71))
        .get(server.url("/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200, "/readyz after the restart");

    // Every buyer told 201 has that very order.
    let pool = common::pool(url.parse().unwrap(), 2).await;
    for ((email, key), outcome, _) in &heard {
        let Heard::Created(id) = outcome else {
            continue;
        };
        let stored: Option<Uuid> =
            sqlx::query_scalar("SELECT id FROM orders WHERE email = $1 AND idempotency_key = $2")
                .bind(email)
                .bind(key)
                .fetch_optional(&pool)
                .await
                .unwrap();
        assert_eq!(stored.map(|u| u.to_string()).as_deref(), Some(id.as_str()));
    }
    // A buyer told 503 retries with the same key: 201 if nothing was
    // written, 200 with the order if its commit landed before the crash.
    let retry_client = client_from(loopback(72));
    for buyer in &overloaded {
        let resp = retry_client
            .post(server.url("/api/v1/orders"))
            .json(&purchase_body(tt, buyer))
            .send()
            .await
            .unwrap();
        assert!(
            matches!(resp.status().as_u16(), 200 | 201),
            "{} retried: {}",
            buyer.0,
            resp.status()
        );
    }
    let answered = heard
        .iter()
        .filter(|(_, outcome, _)| matches!(outcome, Heard::Created(_)))
        .count();
    assert_eq!(
        common::order_count(&pool).await,
        i64::try_from(answered + overloaded.len()).unwrap(),
        "one order per buyer, once each retried"
    );
    let incomplete: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM orders o
         WHERE o.quantity <> (SELECT count(*) FROM tickets t WHERE t.order_id = o.id)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(incomplete, 0, "orders without all their tickets");
    assert_invariants(&pool).await;
    eprintln!(
        "Postgres restart: {answered} answered 201 ({created_after_restart} after the restart), \
         {} answered 503, all retried",
        overloaded.len()
    );
    pool.close().await;
    server.stop();
}
