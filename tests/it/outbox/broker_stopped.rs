//! Issue 37, faults mid-rush: RabbitMQ stopped for 30 s in the middle of a
//! purchase rush. Three `stampede serve` instances behind a real HAProxy,
//! each relaying the outbox to a RabbitMQ node of the test's own (the
//! machine's shared broker serves other tests and is never stopped). The
//! sale never waits on the broker; once the broker is back every order's
//! message arrives, once. (A confirm the broker lost as it shut down makes
//! the relay send that row again: the duplicate carries the same message
//! id and body, so a consumer drops it.)
//!
//! The test's queue is durable and named, declared on the node before the
//! rush: the Listener's exclusive queue would go with the broker. It is
//! read only after the restart, once the outbox has nothing behind (every
//! row confirmed by the broker, so in the queue): its depth then is every
//! message, duplicates included.

use super::*;

use std::time::Instant;

use futures::StreamExt as _;

use common::{
    haproxy::{Forwarding, Haproxy},
    process::{client_from, loopback},
    purchase::fresh_key,
    rabbitmq_node::RabbitNode,
};
use lapin::{
    Channel, Connection, ConnectionProperties, ExchangeKind,
    options::{BasicConsumeOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions},
    types::FieldTable,
};

const TICKETS: i64 = 400;
const BUYERS: usize = 600;
/// One buyer arrives every this often: the rush takes 12 s, long enough
/// to go on well after the broker has stopped.
const ARRIVAL: Duration = Duration::from_millis(20);
/// The broker is stopped once this many orders are committed.
const STOP_AFTER: i64 = 100;
/// How long the broker is down, from the stop.
const DOWN: Duration = Duration::from_secs(30);
const QUEUE: &str = "stampede.test.broker-stopped";

/// A channel on the node at `url`.
async fn channel(url: &str) -> (Connection, Channel) {
    let connection = Connection::connect(url, ConnectionProperties::default())
        .await
        .expect("the private RabbitMQ node");
    let channel = connection.create_channel().await.unwrap();
    (connection, channel)
}

/// The exchange as the relay declares it (durable topic), and the test's
/// durable, shared, kept queue bound to all of it.
async fn declare_queue(url: &str) {
    let (connection, channel) = channel(url).await;
    channel
        .exchange_declare(
            amqp::EXCHANGE.into(),
            ExchangeKind::Topic,
            ExchangeDeclareOptions {
                durable: true,
                ..ExchangeDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    channel
        .queue_declare(
            QUEUE.into(),
            QueueDeclareOptions {
                durable: true,
                exclusive: false,
                auto_delete: false,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    channel
        .queue_bind(
            QUEUE.into(),
            amqp::EXCHANGE.into(),
            "#".into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    connection.close(200, "declared".into()).await.unwrap();
}

/// Messages waiting in the queue (a passive declare: the queue must exist,
/// so this fails if it did not survive the restart).
async fn queue_depth(channel: &Channel) -> u32 {
    channel
        .queue_declare(
            QUEUE.into(),
            QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .expect("the durable queue survived the restart")
        .message_count()
}

/// One delivery parsed, with its raw body (a duplicate must be the same
/// bytes).
fn parse(delivery: &lapin::message::Delivery) -> (Message, Vec<u8>) {
    (Message::parse(delivery), delivery.data.clone())
}

/// Read the queue until `enough` messages came and nothing more comes for
/// half a second (bounded: a hang panics).
async fn drain(channel: &Channel, enough: usize) -> Vec<(Message, Vec<u8>)> {
    let mut consumer = channel
        .basic_consume(
            QUEUE.into(),
            "".into(),
            BasicConsumeOptions {
                no_ack: true,
                ..BasicConsumeOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut received = Vec::new();
    loop {
        let wait = if received.len() < enough {
            tokio::time::timeout_at(deadline, consumer.next()).await
        } else {
            tokio::time::timeout(Duration::from_millis(500), consumer.next()).await
        };
        match wait {
            Ok(delivery) => {
                let delivery = delivery.expect("the consumer is open").expect("a delivery");
                received.push(parse(&delivery));
            }
            Err(_) if received.len() >= enough => return received,
            Err(_) => panic!(
                "{} of {enough} messages within 20 s of draining",
                received.len()
            ),
        }
    }
}

/// By message id, after checking every message's id property and routing
/// key, and that each duplicate is byte for byte the message it repeats.
/// Also returns how many duplicates there were.
fn deduplicated(received: &[(Message, Vec<u8>)]) -> (BTreeMap<Uuid, Message>, usize) {
    let mut bodies: BTreeMap<Uuid, &[u8]> = BTreeMap::new();
    let mut by_id = BTreeMap::new();
    let mut duplicates = 0;
    for (message, body) in received {
        assert_eq!(message.message_id, message.id.to_string(), "message_id");
        assert_eq!(message.routing_key, message.kind, "routing key");
        match bodies.get(&message.id) {
            Some(seen) => {
                duplicates += 1;
                assert_eq!(
                    *seen,
                    body.as_slice(),
                    "message {} twice, differing",
                    message.id
                );
            }
            None => {
                bodies.insert(message.id, body);
                by_id.insert(message.id, message.clone());
            }
        }
    }
    (by_id, duplicates)
}

/// Outbox rows of the event not yet confirmed by the broker.
async fn behind(pool: &PgPool, event_id: Uuid) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM outbox_behind('amqp') WHERE event_id = $1")
        .bind(event_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Orders of the ticket type, and of its outbox rows how many the broker
/// has confirmed, in one snapshot.
async fn committed_and_confirmed(pool: &PgPool, event_id: Uuid, tt: Uuid) -> (i64, i64) {
    sqlx::query_as(
        "SELECT (SELECT count(*) FROM orders WHERE ticket_type_id = $2),
                (SELECT count(*) FROM outbox WHERE event_id = $1)
                  - (SELECT count(*) FROM outbox_behind('amqp') WHERE event_id = $1)",
    )
    .bind(event_id)
    .bind(tt)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// What one buyer got: their order, or sold out; and every attempt's
/// start, latency and status (0: no response).
struct Outcome {
    email: String,
    key: String,
    order: Option<String>,
    attempts: Vec<(Instant, Duration, u16)>,
}

/// One buyer through the balancer; after a failure (which the test then
/// reports) they try again with the same key until they get an answer.
async fn buyer(client: reqwest::Client, url: String, tt: Uuid, i: usize) -> Outcome {
    let mut outcome = Outcome {
        email: format!("rush{i}@example.org"),
        key: fresh_key(),
        order: None,
        attempts: Vec::new(),
    };
    for _ in 0..20 {
        let started = Instant::now();
        let response = client
            .post(&url)
            .json(&json!({
                "ticket_type_id": tt, "quantity": 1,
                "email": outcome.email, "idempotency_key": outcome.key,
            }))
            .timeout(Duration::from_secs(20))
            .send()
            .await;
        let status = response.as_ref().map_or(0, |r| r.status().as_u16());
        outcome.attempts.push((started, started.elapsed(), status));
        match status {
            200 | 201 => {
                let body: serde_json::Value = response.unwrap().json().await.unwrap();
                outcome.order = Some(body["id"].as_str().unwrap().to_owned());
                return outcome;
            }
            409 => return outcome,
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    panic!("{} got no answer in 20 attempts", outcome.email);
}

#[sqlx::test]
async fn rabbitmq_stopped_for_30_s_mid_rush_every_message_arrives_later_once(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let began = Instant::now();
    let pool = pool(connect.clone(), 5).await;
    let fixture = published_event(&pool, &[TicketSpec::new(TICKETS, 1, 1)]).await;
    let (event, tt) = (fixture.event_id, fixture.ticket_type_id());

    let mut broker = RabbitNode::start().await;
    let broker_started = began.elapsed();
    declare_queue(&broker.url()).await;
    let amqp_url = broker.url();
    let args = [
        "--proxy-protocol",
        "--trusted-proxies",
        "127.0.0.1/32",
        "--purchase-burst-per-ip",
        "0",
        "--purchase-burst-per-email",
        "0",
        "--amqp-url",
        &amqp_url,
    ];
    let url = database_url(&connect);
    let mut instances = Vec::new();
    for _ in 0..3 {
        instances.push(ServerProcess::start(&url, &args).await);
    }
    let addrs: Vec<_> = instances.iter().map(|i| i.addr).collect();
    let balancer = Haproxy::start(&addrs, Forwarding::ProxyProtocol).await;

    // The rush: a buyer every 20 ms, each through the balancer.
    let client = client_from(loopback(9));
    let orders = balancer.url("/api/v1/orders");
    let rush = tokio::spawn(async move {
        let buyers: Vec<_> = (0..BUYERS)
            .map(|i| {
                let (client, orders) = (client.clone(), orders.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(ARRIVAL * i as u32).await;
                    buyer(client, orders, tt, i).await
                })
            })
            .collect();
        let mut outcomes = Vec::new();
        for buyer in buyers {
            outcomes.push(buyer.await.unwrap());
        }
        outcomes
    });

    // The stop, once the rush is under way.
    let waiting = Instant::now();
    let committed_at_trigger = loop {
        let (committed, _) = committed_and_confirmed(&pool, event, tt).await;
        if committed >= STOP_AFTER {
            break committed;
        }
        assert!(
            waiting.elapsed() < Duration::from_secs(30),
            "{STOP_AFTER} orders not committed within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let stop_began = Instant::now();
    broker.stop().await;
    let stopping_took = stop_began.elapsed();
    // The node is gone: nothing more is confirmed until it is back.
    let (committed_at_stop, confirmed_at_stop) = committed_and_confirmed(&pool, event, tt).await;

    let outcomes = rush.await.unwrap();
    let rush_ended = stop_began.elapsed();
    tokio::time::sleep(DOWN.saturating_sub(stop_began.elapsed())).await;
    let (committed_before_restart, confirmed_before_restart) =
        committed_and_confirmed(&pool, event, tt).await;
    let unsent_before_restart = behind(&pool, event).await;
    assert_eq!(
        confirmed_before_restart, confirmed_at_stop,
        "confirmed while the broker was down: it was not"
    );
    assert!(
        unsent_before_restart > 0,
        "nothing was left unsent by the stop: no test"
    );
    assert!(
        committed_before_restart > committed_at_stop,
        "no order was committed while the broker was down: no test"
    );

    let down_for = stop_began.elapsed();
    let restart_began = Instant::now();
    let restart_wall = time::OffsetDateTime::now_utc();
    broker.start_again().await;
    let restarting_took = restart_began.elapsed();
    let (_connection, channel) = channel(&broker.url()).await;
    // What survived the stop (the relays may already have added some).
    let depth_on_return = queue_depth(&channel).await;
    assert!(
        i64::from(depth_on_return) >= confirmed_at_stop,
        "{confirmed_at_stop} messages confirmed before the stop, {depth_on_return} in the queue after it"
    );

    // Every row confirmed (bounded): then the queue holds every message.
    let catching_up = Instant::now();
    while behind(&pool, event).await > 0 {
        assert!(
            catching_up.elapsed() < Duration::from_secs(60),
            "outbox rows still unsent 60 s after the broker came back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let caught_up = restart_began.elapsed();
    let last_confirmed: time::OffsetDateTime =
        sqlx::query_scalar("SELECT moved_at FROM outbox_cursors WHERE consumer = 'amqp'")
            .fetch_one(&pool)
            .await
            .unwrap();
    let depth = queue_depth(&channel).await;
    let received = drain(&channel, depth as usize).await;
    for instance in instances.iter_mut() {
        assert!(instance.is_running(), "an instance died");
    }
    drop(balancer);
    drop(instances);

    // The sale never waited on the broker: no attempt failed, and every
    // buyer was answered (an order, or sold out).
    let failed: Vec<_> = outcomes
        .iter()
        .flat_map(|o| o.attempts.iter())
        .filter(|(_, _, status)| !matches!(status, 200 | 201 | 409))
        .map(|(at, _, status)| (at.saturating_duration_since(stop_began), *status))
        .collect();
    assert!(
        failed.is_empty(),
        "failed attempts (time after the stop, status): {failed:?}"
    );
    let during_stop: Vec<Duration> = outcomes
        .iter()
        .flat_map(|o| o.attempts.iter())
        .filter(|(at, _, _)| *at >= stop_began)
        .map(|(_, latency, _)| *latency)
        .collect();
    let slowest_during_stop = during_stop.iter().max().copied().unwrap_or_default();
    assert!(
        slowest_during_stop < Duration::from_secs(10),
        "a purchase took {slowest_during_stop:?} while the broker was down"
    );
    let committed: BTreeMap<(String, String), String> = sqlx::query_as::<_, (String, String, Uuid)>(
        "SELECT email, idempotency_key, id FROM orders WHERE ticket_type_id = $1 AND status = 'confirmed'",
    )
    .bind(tt)
    .fetch_all(&pool)
    .await
    .unwrap()
    .into_iter()
    .map(|(email, key, id)| ((email, key), id.to_string()))
    .collect();
    let answered: BTreeMap<(String, String), String> = outcomes
        .iter()
        .filter_map(|o| Some(((o.email.clone(), o.key.clone()), o.order.clone()?)))
        .collect();
    assert_eq!(answered, committed, "answered and committed orders differ");
    assert_eq!(committed.len() as i64, TICKETS, "the rush sold out");
    assert_invariants(&pool).await;

    // Every order's message arrived, each once after dropping duplicates,
    // and nothing else of the event's orders.
    let (messages, duplicates) = deduplicated(&received);
    assert!(messages.values().all(|m| m.event_id == event));
    assert_eq!(
        order_messages(&messages),
        expected_order_messages(&pool, event).await,
        "the order messages that arrived are not the committed orders'"
    );
    let outbox_rows: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox WHERE event_id = $1")
        .bind(event)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        messages.len() as i64,
        outbox_rows,
        "one message per outbox row"
    );

    eprintln!(
        "broker stopped mid-rush: node up in {broker_started:?} (test start), stopped in {stopping_took:?}, \
         down {down_for:?}, restarted in {restarting_took:?}; rush over {rush_ended:?} after the stop; \
         orders committed before the stop {committed_at_trigger}, by the time the node was gone \
         {committed_at_stop} (messages confirmed then {confirmed_at_stop}), \
         while down {} (unsent at restart {unsent_before_restart}), after the restart {}; \
         in the queue when it came back {depth_on_return}; received {} ({} distinct, {duplicates} duplicates); \
         outbox caught up {:?} after the restart began, last confirm {:.2} s after it; \
         slowest purchase during the stop {slowest_during_stop:?}; test took {:?}",
        committed_before_restart - committed_at_stop,
        committed.len() as i64 - committed_before_restart,
        received.len(),
        messages.len(),
        caught_up,
        (last_confirmed - restart_wall).as_seconds_f64(),
        began.elapsed(),
    );
}
