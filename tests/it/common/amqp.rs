//! RabbitMQ for the outbox tests: a consumer on its own exclusive queue
//! bound to the relay's exchange, reading the messages of one event, and
//! a TCP proxy in front of the broker whose connections a test can cut.
//!
//! The broker is the shared one at 127.0.0.1:5672 (guest/guest, or
//! `STAMPEDE_TEST_AMQP_URL`): each test creates its own event and keeps
//! only that event's messages, so tests running at once do not mix.

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use futures::StreamExt as _;
use lapin::{
    Connection, ConnectionProperties, Consumer, ExchangeKind,
    options::{BasicConsumeOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions},
    types::FieldTable,
};
use serde_json::Value;
use tokio::{
    net::{TcpListener, TcpStream},
    sync::Mutex,
    task::JoinHandle,
};
use uuid::Uuid;

pub const EXCHANGE: &str = "stampede.events";

/// The broker the tests use.
pub fn amqp_url() -> String {
    std::env::var("STAMPEDE_TEST_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned())
}

/// The relay's settings for `url`, polling often so tests finish quickly.
pub fn relay_settings(url: &str) -> stampede::outbox::RelaySettings {
    let mut settings = stampede::outbox::RelaySettings::new(url).unwrap();
    settings.poll = Duration::from_millis(20);
    settings.backoff_max = Duration::from_millis(500);
    settings.confirm_timeout = Duration::from_secs(5);
    settings
}

/// One received message, parsed from its body (and its AMQP properties).
#[derive(Debug, Clone)]
pub struct Message {
    pub id: Uuid,
    pub kind: String,
    pub event_id: Uuid,
    pub order_id: Option<Uuid>,
    pub ticket_type_id: Option<Uuid>,
    pub sequence: i64,
    pub data: Value,
    /// The AMQP `message_id` property: must equal `id`.
    pub message_id: String,
    pub routing_key: String,
}

impl Message {
    /// A delivery's message, parsed from its JSON body and its properties.
    pub fn parse(delivery: &lapin::message::Delivery) -> Self {
        let body: Value = serde_json::from_slice(&delivery.data).unwrap();
        let uuid = |v: &Value| v.as_str().map(|s| Uuid::parse_str(s).unwrap());
        Self {
            id: uuid(&body["id"]).unwrap(),
            kind: body["type"].as_str().unwrap().to_owned(),
            event_id: uuid(&body["event_id"]).unwrap(),
            order_id: uuid(&body["order_id"]),
            ticket_type_id: uuid(&body["ticket_type_id"]),
            sequence: body["sequence"].as_i64().unwrap(),
            data: body["data"].clone(),
            message_id: delivery
                .properties
                .message_id()
                .as_ref()
                .map(|id| id.to_string())
                .unwrap_or_default(),
            routing_key: delivery.routing_key.to_string(),
        }
    }
}

/// A consumer on an exclusive, server-named queue bound to every routing
/// key of the exchange.
pub struct Listener {
    _connection: Connection,
    consumer: Consumer,
    /// Every message of the event, in arrival order, duplicates included.
    pub received: Vec<Message>,
}

impl Listener {
    /// Bind before the relay runs: a topic exchange keeps nothing for
    /// queues that do not exist yet.
    pub async fn bind() -> Self {
        let connection = Connection::connect(&amqp_url(), ConnectionProperties::default())
            .await
            .expect("RabbitMQ at 127.0.0.1:5672 (guest/guest) for the outbox tests");
        let channel = connection.create_channel().await.unwrap();
        channel
            .exchange_declare(
                EXCHANGE.into(),
                ExchangeKind::Topic,
                ExchangeDeclareOptions {
                    durable: true,
                    ..ExchangeDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap();
        let queue = channel
            .queue_declare(
                "".into(),
                QueueDeclareOptions {
                    exclusive: true,
                    auto_delete: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap();
        channel
            .queue_bind(
                queue.name().clone(),
                EXCHANGE.into(),
                "#".into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
        let consumer = channel
            .basic_consume(
                queue.name().clone(),
                "".into(),
                BasicConsumeOptions {
                    no_ack: true,
                    ..BasicConsumeOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap();
        Self {
            _connection: connection,
            consumer,
            received: Vec::new(),
        }
    }

    /// Receive until `done` holds for the messages of `event_id` so far
    /// (duplicates included). Panics after two minutes: a hang, not a
    /// timing assertion.
    pub async fn until(&mut self, event_id: Uuid, done: impl Fn(&[Message]) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        while !done(&self.received) {
            let next = tokio::time::timeout_at(deadline, self.consumer.next())
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "no further message within 2 minutes; received {:?}",
                        self.received
                            .iter()
                            .map(|m| (&m.kind, m.order_id, m.sequence))
                            .collect::<Vec<_>>()
                    )
                })
                .expect("the consumer is open")
                .expect("a delivery");
            let message = Message::parse(&next);
            if message.event_id == event_id {
                self.received.push(message);
            }
        }
    }

    /// Until a message of `kind` about `order_id` has arrived.
    pub async fn until_order(&mut self, event_id: Uuid, kind: &str, order_id: Uuid) {
        self.until(event_id, |received| {
            received
                .iter()
                .any(|m| m.kind == kind && m.order_id == Some(order_id))
        })
        .await;
    }

    /// The received messages by id: duplicates (at least once) dropped,
    /// after checking that a duplicate is the same message.
    pub fn deduplicated(&self) -> BTreeMap<Uuid, Message> {
        let mut by_id = BTreeMap::new();
        for message in &self.received {
            assert_eq!(message.message_id, message.id.to_string());
            assert_eq!(message.routing_key, message.kind);
            if let Some(seen) = by_id.insert(message.id, message.clone()) {
                assert_eq!(
                    (seen.kind, seen.order_id, seen.sequence),
                    (message.kind.clone(), message.order_id, message.sequence),
                    "one message id, two messages"
                );
            }
        }
        by_id
    }
}

/// A TCP proxy to the broker: the relay connects through it, and
/// [`Proxy::cut`] closes every connection and refuses new ones until
/// [`Proxy::restore`].
pub struct Proxy {
    pub addr: SocketAddr,
    refusing: Arc<AtomicBool>,
    links: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
}

impl Proxy {
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let refusing = Arc::new(AtomicBool::new(false));
        let links: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let accept = {
            let (refusing, links) = (refusing.clone(), links.clone());
            tokio::spawn(async move {
                loop {
                    let Ok((mut inbound, _)) = listener.accept().await else {
                        continue;
                    };
                    if refusing.load(Ordering::SeqCst) {
                        drop(inbound);
                        continue;
                    }
                    let link = tokio::spawn(async move {
                        if let Ok(mut outbound) = TcpStream::connect(upstream).await {
                            let _ =
                                tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        }
                    });
                    links.lock().await.push(link);
                }
            })
        };
        Self {
            addr,
            refusing,
            links,
            accept,
        }
    }

    /// `amqp://` through this proxy.
    pub fn url(&self) -> String {
        format!("amqp://guest:guest@{}/%2f", self.addr)
    }

    /// Close every open connection and refuse new ones.
    pub async fn cut(&self) {
        self.refusing.store(true, Ordering::SeqCst);
        for link in self.links.lock().await.drain(..) {
            link.abort();
        }
    }

    /// Accept (and forward) connections again.
    pub fn restore(&self) {
        self.refusing.store(false, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// The broker's address, for a proxy in front of it.
pub fn broker_addr() -> SocketAddr {
    "127.0.0.1:5672".parse().unwrap()
}
