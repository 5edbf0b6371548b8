//! Faults: a broker cut, a killed app, two relays, a late commit.

use super::*;

/// (c) The broker connection is cut in the middle of a burst (a proxy
/// between relay and broker closes it and refuses new ones), then comes
/// back: every committed order's message arrives.
#[sqlx::test]
async fn a_broker_cut_mid_burst_loses_no_message(_: PgPoolOptions, connect: PgConnectOptions) {
    let pool = pool(connect, 16).await;
    let fixture = published_event(
        &pool,
        &[TicketSpec::new(1000, 1, 1), TicketSpec::new(10, 1, 10)],
    )
    .await;
    let (hot, marker) = (fixture.ticket_type_ids[0], fixture.ticket_type_ids[1]);
    let proxy = Proxy::start(amqp::broker_addr()).await;
    let mut listener = Listener::bind().await;
    let mut settings = amqp::relay_settings(&proxy.url());
    settings.batch = 10;
    let relay = outbox::spawn(pool.clone(), settings);
    let sales = Arc::new(Sales::new(
        pool.clone(),
        Strategy::Batch,
        EngineSettings::default(),
    ));

    let burst = |from: usize, to: usize| {
        let sales = sales.clone();
        tokio::spawn(async move {
            let tasks: Vec<_> = (from..to)
                .map(|i| {
                    let sales = sales.clone();
                    let request = purchase_request(hot, 1, &format!("b{i}@example.org"));
                    tokio::spawn(async move { sales.purchase(now(), &request).await.unwrap() })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
        })
    };
    // The first half, and the relay publishing it...
    let first = burst(0, 150);
    listener
        .until(fixture.event_id, |received| !received.is_empty())
        .await;
    // ...when the connection goes, with purchases still coming.
    proxy.cut().await;
    let second = burst(150, 300);
    first.await.unwrap();
    second.await.unwrap();
    let unsent: i64 =
        sqlx::query_scalar("SELECT count(*) FROM outbox_behind('amqp') WHERE event_id = $1")
            .bind(fixture.event_id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(unsent > 0, "the cut left nothing unsent: no test");
    proxy.restore();

    settle(&pool, &mut listener, fixture.event_id, marker).await;
    relay.abort();
    let received = listener.deduplicated();
    assert_eq!(
        order_messages(&received),
        expected_order_messages(&pool, fixture.event_id).await
    );
    assert_eq!(common::sold(&pool, hot).await, 300);
}

/// (d) The app is killed (SIGKILL) after a purchase committed and before
/// its message went out (its relay cannot reach the broker): started again
/// with the broker, it publishes the message.
#[sqlx::test]
async fn an_app_killed_between_commit_and_publish_publishes_after_restart(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect.clone(), 4).await;
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let url = database_url(&connect);
    let mut listener = Listener::bind().await;
    // A broker address that refuses every connection.
    let proxy = Proxy::start(amqp::broker_addr()).await;
    proxy.cut().await;
    let unreachable = proxy.url();

    let server = ServerProcess::start(&url, &["--amqp-url", &unreachable]).await;
    let response = reqwest::Client::new()
        .post(server.url("/api/v1/orders"))
        .json(&json!({
            "ticket_type_id": fixture.ticket_type_id(),
            "quantity": 2,
            "email": "killed@example.org",
            "idempotency_key": Uuid::new_v4().to_string(),
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let body: serde_json::Value = response.json().await.unwrap();
    let order_id = Uuid::parse_str(body["id"].as_str().unwrap()).unwrap();
    let unsent: i64 =
        sqlx::query_scalar("SELECT count(*) FROM outbox_behind('amqp') WHERE order_id = $1")
            .bind(order_id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(unsent, 1, "committed, not published");
    drop(server); // SIGKILL, and reaped

    let server = ServerProcess::start(&url, &["--amqp-url", &amqp::amqp_url()]).await;
    listener
        .until_order(fixture.event_id, "order.created", order_id)
        .await;
    let message = listener
        .received
        .iter()
        .find(|m| m.order_id == Some(order_id))
        .unwrap();
    assert_eq!(message.sequence, 1);
    assert_eq!(message.data["quantity"], json!(2));
    drop(server);
}

/// (e) Two relays on one database, each claiming small batches of the same
/// backlog at once: no row is sent by both (no message id arrives twice)
/// and every row is sent.
#[sqlx::test]
async fn two_relays_on_one_database_never_send_a_row_twice(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 16).await;
    let fixture = published_event(
        &pool,
        &[TicketSpec::new(1000, 1, 1), TicketSpec::new(10, 1, 10)],
    )
    .await;
    let (hot, marker) = (fixture.ticket_type_ids[0], fixture.ticket_type_ids[1]);
    let sales = Arc::new(Sales::new(
        pool.clone(),
        Strategy::Batch,
        EngineSettings::default(),
    ));
    // The backlog first, with no relay running.
    let tasks: Vec<_> = (0..300)
        .map(|i| {
            let sales = sales.clone();
            let request = purchase_request(hot, 1, &format!("b{i}@example.org"));
            tokio::spawn(async move { sales.purchase(now(), &request).await.unwrap() })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let mut listener = Listener::bind().await;
    let mut settings = amqp::relay_settings(&amqp::amqp_url());
    settings.batch = 5;
    let relays = [
        outbox::spawn(pool.clone(), settings.clone()),
        outbox::spawn(pool.clone(), settings),
    ];
    settle(&pool, &mut listener, fixture.event_id, marker).await;
    for relay in relays {
        relay.abort();
    }
    let mut seen = BTreeSet::new();
    let twice: Vec<_> = listener
        .received
        .iter()
        .filter(|m| !seen.insert(m.id))
        .map(|m| (m.kind.clone(), m.order_id))
        .collect();
    assert!(twice.is_empty(), "sent twice: {twice:?}");
    assert_eq!(
        order_messages(&listener.deduplicated()),
        expected_order_messages(&pool, fixture.event_id).await
    );
}

/// The outbox's readers go in log order, (transaction id, position), and
/// only past transactions that have ended: a row whose transaction commits
/// after a later-numbered one (its position was drawn first) is read when
/// it commits, not skipped behind a cursor that moved on. (Without the
/// horizon, the first read takes the later row and the cursor passes the
/// earlier one for good.)
#[sqlx::test]
async fn a_row_that_commits_late_is_read_and_not_skipped(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    use stampede::db::outbox::{Consumer, move_cursor, read_after_cursor};

    let pool = pool(connect, 4).await;
    let fixture = published_event(&pool, &[TicketSpec::new(10, 1, 10)]).await;
    let write = "INSERT INTO outbox (kind, event_id, sequence, payload)
                 VALUES ('event.cancelled', $1, $2, '{}') RETURNING id";
    // One consumer round: read, move the cursor past what was read, commit.
    let round = async || {
        let mut tx = pool.begin().await.unwrap();
        let rows = read_after_cursor(&mut tx, Consumer::Webhooks, 100)
            .await
            .unwrap();
        if let Some(last) = rows.last() {
            move_cursor(&mut tx, Consumer::Webhooks, last)
                .await
                .unwrap();
        }
        tx.commit().await.unwrap();
        rows.into_iter()
            .filter(|row| row.event_id == fixture.event_id)
            .map(|row| row.id)
            .collect::<Vec<Uuid>>()
    };
    // The rows the fixture wrote (none expected, but keep the test exact).
    round().await;

    let mut late = pool.begin().await.unwrap();
    let early: Uuid = sqlx::query_scalar(write)
        .bind(fixture.event_id)
        .bind(1_i64)
        .fetch_one(&mut *late)
        .await
        .unwrap();
    let later: Uuid = sqlx::query_scalar(write)
        .bind(fixture.event_id)
        .bind(2_i64)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        round().await,
        Vec::<Uuid>::new(),
        "nothing is read while a transaction that began writing first is open"
    );
    late.commit().await.unwrap();
    // Other tests' writing transactions on this server hold the horizon
    // back too: read until both rows came (bounded).
    let mut read = Vec::new();
    for _ in 0..600 {
        read.extend(round().await);
        if read.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    read.extend(round().await);
    assert_eq!(
        read,
        vec![early, later],
        "both rows, each once, in log order"
    );
}
