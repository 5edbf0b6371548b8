//! Issue 10: the transactional outbox and its RabbitMQ relay, against a
//! real RabbitMQ (127.0.0.1:5672) and real Postgres. Each test binds its own
//! exclusive queue to the exchange before the relay runs and keeps only the
//! messages of the event it created; what it expects is read from the
//! tables (orders, ticket types), never from the outbox itself.
//!
//! "Everything has arrived" is made certain without timing: once every
//! outbox row of the event is marked sent (the broker confirmed it, so it is
//! in our queue), one more order is bought and its message awaited; the
//! queue is first in, first out, so nothing sent before it can still come.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod broker_stopped;
mod faults;
mod messages;

use crate::common;

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::Duration,
};

use common::{
    TicketSpec,
    amqp::{self, Listener, Message, Proxy},
    assert_invariants, database_url, locks, now, pool,
    process::ServerProcess,
    published_event,
    purchase::purchase_request,
};
use serde_json::json;
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use stampede::{
    error::AppError,
    outbox,
    sale::{self, EngineSettings, Purchase, Sales, Strategy},
};
use tokio::sync::Barrier;
use uuid::Uuid;

/// (type, order id, sequence) of every order message the tables call for:
/// `order.created` (1) for each order of the event, `order.cancelled` (2)
/// for each cancelled one.
async fn expected_order_messages(pool: &PgPool, event_id: Uuid) -> BTreeSet<(String, Uuid, i64)> {
    let orders: Vec<(Uuid, String)> = sqlx::query_as(
        "SELECT o.id, o.status FROM orders o JOIN ticket_types t ON t.id = o.ticket_type_id
         WHERE t.event_id = $1",
    )
    .bind(event_id)
    .fetch_all(pool)
    .await
    .unwrap();
    let mut expected = BTreeSet::new();
    for (id, status) in orders {
        expected.insert(("order.created".to_owned(), id, 1));
        if status == "cancelled" {
            expected.insert(("order.cancelled".to_owned(), id, 2));
        }
    }
    expected
}

fn order_messages(received: &BTreeMap<Uuid, Message>) -> BTreeSet<(String, Uuid, i64)> {
    received
        .values()
        .filter_map(|m| Some((m.kind.clone(), m.order_id?, m.sequence)))
        .collect()
}

/// A ticket type's availability messages, in sequence order: they alternate
/// from `sold_out`, there are as many as the row's transitions, and the
/// last says what `remaining` says.
async fn assert_availability(pool: &PgPool, received: &BTreeMap<Uuid, Message>, tt: Uuid) {
    let (remaining, transitions): (i32, i64) =
        sqlx::query_as("SELECT remaining, availability_seq FROM ticket_types WHERE id = $1")
            .bind(tt)
            .fetch_one(pool)
            .await
            .unwrap();
    let mut kinds: Vec<(i64, &str)> = received
        .values()
        .filter(|m| m.ticket_type_id == Some(tt) && m.order_id.is_none())
        .map(|m| (m.sequence, m.kind.as_str()))
        .collect();
    kinds.sort();
    let expected: Vec<(i64, &str)> = (1..=transitions)
        .map(|n| {
            let kind = if n % 2 == 1 {
                "ticket_type.sold_out"
            } else {
                "ticket_type.available_again"
            };
            (n, kind)
        })
        .collect();
    assert_eq!(kinds, expected, "availability messages of {tt}");
    if let Some((_, last)) = kinds.last() {
        assert_eq!(*last == "ticket_type.sold_out", remaining == 0);
    }
}

/// Wait until the relay's cursor is past every outbox row of the event
/// (bounded).
async fn wait_all_sent(pool: &PgPool, event_id: Uuid) {
    for _ in 0..1200 {
        let unsent: i64 =
            sqlx::query_scalar("SELECT count(*) FROM outbox_behind('amqp') WHERE event_id = $1")
                .bind(event_id)
                .fetch_one(pool)
                .await
                .unwrap();
        if unsent == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("outbox rows of {event_id} still unsent after 2 minutes");
}

/// Everything sent before now has arrived: one more order (on the marker
/// ticket type), and its message awaited. Returns the marker order's id.
async fn settle(pool: &PgPool, listener: &mut Listener, event_id: Uuid, marker_tt: Uuid) -> Uuid {
    wait_all_sent(pool, event_id).await;
    let request = purchase_request(
        marker_tt,
        1,
        &format!("marker-{}@example.org", Uuid::new_v4()),
    );
    let order = sale::purchase(pool, now(), &request)
        .await
        .unwrap()
        .order()
        .id
        .get();
    listener.until_order(event_id, "order.created", order).await;
    order
}

/// No payload carries a secret: only ids and state.
fn assert_no_secrets(received: &BTreeMap<Uuid, Message>) {
    let allowed: BTreeSet<&str> = [
        "order_id",
        "event_id",
        "ticket_type_id",
        "email",
        "quantity",
        "status",
        "unit_price_minor",
        "currency",
        "created_at",
        "cancelled_at",
        // Held orders (issue 13): when the hold ends, when it was confirmed.
        "hold_expires_at",
        "confirmed_at",
        "reason",
        "remaining",
        "capacity",
        "sequence",
    ]
    .into();
    for message in received.values() {
        let keys = message.data.as_object().unwrap().keys();
        for key in keys {
            assert!(allowed.contains(key.as_str()), "payload field {key}");
        }
    }
}
