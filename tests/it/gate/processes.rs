//! Three `stampede serve` processes sharing one gate.

use super::*;

/// Three `stampede serve` processes on one database and one gate (same
/// Redis, same prefix), a burst spread over them: 150 buyers for 40
/// tickets, 20 keys each sent three times (to three processes), one buyer
/// over the limit with fresh keys. From the tables: nothing oversold,
/// each key at most one order (and every answer for it names that order),
/// the limit held, every ticket sold; and the gate refused most of it.
#[sqlx::test]
async fn three_app_processes_share_the_gate(_: PgPoolOptions, connect: PgConnectOptions) {
    let (pool, fixture) = setup(connect.clone(), TicketSpec::new(40, 2, 2)).await;
    let tt = fixture.ticket_type_id();
    let url = database_url(&connect);
    let redis = shared_redis();
    let prefix = format!("stampede:test:processes:{}:", Uuid::new_v4());
    let args = [
        "--redis-gate",
        "--redis-url",
        &redis,
        "--redis-gate-prefix",
        &prefix,
        "--redis-gate-timeout-ms",
        "1000",
        "--purchase-burst-per-ip",
        "0",
    ];
    let servers = [
        ServerProcess::start(&url, &args).await,
        ServerProcess::start(&url, &args).await,
        ServerProcess::start(&url, &args).await,
    ];

    let mut buyers: Vec<(String, String, u8)> = Vec::new();
    for i in 0..150 {
        buyers.push((format!("fan{i}@example.org"), fresh_key(), 1));
    }
    for i in 0..20 {
        let key = fresh_key();
        for _ in 0..3 {
            buyers.push((format!("again{i}@example.org"), key.clone(), 1));
        }
    }
    for i in 0..12 {
        buyers.push(("Hog+x@example.org".into(), fresh_key(), 1 + i % 2));
    }
    let client = reqwest::Client::new();
    let answers: Vec<(String, String, u16, Option<String>)> =
        futures::stream::iter(buyers.into_iter().enumerate())
            .map(|(i, (email, key, quantity))| {
                let request =
                    client
                        .post(servers[i % 3].url("/api/v1/orders"))
                        .json(&serde_json::json!({
                            "ticket_type_id": tt,
                            "quantity": quantity,
                            "email": email,
                            "idempotency_key": key,
                        }));
                async move {
                    let response = request.send().await.unwrap();
                    let status = response.status().as_u16();
                    let body: serde_json::Value = response.json().await.unwrap();
                    let order = body["id"].as_str().map(str::to_owned);
                    (email, key, status, order)
                }
            })
            .buffer_unordered(64)
            .collect()
            .await;

    for (email, _, status, _) in &answers {
        assert!(
            [200, 201, 409].contains(status),
            "{email}: {status} from a process"
        );
    }
    assert_invariants(&pool).await;
    assert_eq!(sold(&pool, tt).await, 40, "tickets left unsold");
    // Each key: at most one order, and every answer with an order names it.
    let mut by_key: std::collections::HashMap<&str, std::collections::BTreeSet<&str>> =
        std::collections::HashMap::new();
    for (_, key, _, order) in &answers {
        if let Some(order) = order {
            by_key
                .entry(key.as_str())
                .or_default()
                .insert(order.as_str());
        }
    }
    assert!(
        by_key.values().all(|orders| orders.len() == 1),
        "{by_key:?}"
    );
    let hog: i64 = sqlx::query_scalar(
        "SELECT COALESCE(sum(quantity), 0) FROM orders
         WHERE ticket_type_id = $1 AND email = 'Hog+x@example.org' AND status = 'confirmed'",
    )
    .bind(tt)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(hog <= 2, "the hog holds {hog}");

    // The gate was shared: purchases refused from Redis, and about as many
    // admitted (over the three processes) as there are tickets.
    let (mut admitted, mut refused) = (0.0, 0.0);
    for server in &servers {
        admitted += counter(server, r#"stampede_gate_total{outcome="admitted"}"#).await;
        refused += counter(server, r#"stampede_gate_total{outcome="sold_out"}"#).await;
    }
    assert!(refused > 0.0, "nothing refused from Redis");
    assert!(admitted >= 1.0, "nothing admitted");
    assert!(
        admitted <= 40.0 + 2.0 * 20.0,
        "{admitted} admitted for 40 tickets"
    );
}
