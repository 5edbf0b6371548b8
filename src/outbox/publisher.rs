//! One AMQP connection and channel with publisher confirms, and the message
//! each outbox row becomes.

use std::time::Duration;

use lapin::{
    BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, ExchangeKind,
    options::{BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions},
    types::{AMQPValue, FieldTable},
};
use serde_json::json;
use time::format_description::well_known::Rfc3339;

use super::RelaySettings;
use crate::db::outbox::OutboxRow;

/// Persistent (written to disk by the broker), as AMQP's `delivery_mode`.
const PERSISTENT: u8 = 2;

pub(super) struct Publisher {
    connection: Connection,
    channel: Channel,
    exchange: String,
}

/// What a batch's publishing achieved.
pub(super) struct Outcome {
    /// How many rows, from the first, the broker confirmed (acked) without
    /// a gap: the relay's cursor moves past these.
    pub confirmed: usize,
    /// Why the rest were not, if the broker or the connection failed.
    pub error: Option<String>,
}

impl Publisher {
    /// Connect, open a channel in confirm mode and declare the exchange
    /// (durable topic; declaring an existing one with the same type is a
    /// no-op).
    pub async fn connect(settings: &RelaySettings) -> Result<Self, lapin::Error> {
        let properties =
            ConnectionProperties::default().with_connection_name("stampede outbox relay".into());
        let connection = Connection::connect(&settings.amqp_url, properties).await?;
        let channel = connection.create_channel().await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        channel
            .exchange_declare(
                settings.exchange.as_str().into(),
                ExchangeKind::Topic,
                ExchangeDeclareOptions {
                    durable: true,
                    ..ExchangeDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await?;
        Ok(Self {
            connection,
            channel,
            exchange: settings.exchange.clone(),
        })
    }

    /// Publish every row, then wait (at most `timeout`) for the broker's
    /// confirms. Stops at the first failure: the rows confirmed before it
    /// still count.
    pub async fn publish_all(&self, rows: &[OutboxRow], timeout: Duration) -> Outcome {
        let mut pending = Vec::with_capacity(rows.len());
        let mut error = None;
        for row in rows {
            let published = self
                .channel
                .basic_publish(
                    self.exchange.as_str().into(),
                    row.kind.as_str().into(),
                    BasicPublishOptions::default(),
                    &body(row),
                    properties(row),
                )
                .await;
            match published {
                Ok(confirm) => pending.push(confirm),
                Err(err) => {
                    error = Some(err.to_string());
                    break;
                }
            }
        }
        let mut confirmed = 0;
        let deadline = tokio::time::Instant::now() + timeout;
        for confirm in pending {
            let failure = match tokio::time::timeout_at(deadline, confirm).await {
                Ok(Ok(Confirmation::Ack(_))) => {
                    confirmed += 1;
                    continue;
                }
                Ok(Ok(other)) => format!("not confirmed: {other:?}"),
                Ok(Err(err)) => err.to_string(),
                Err(_) => "no confirm within the timeout".to_owned(),
            };
            error.get_or_insert(failure);
            break;
        }
        Outcome { confirmed, error }
    }

    pub async fn close(self) {
        let _ = self.channel.close(200, "reconnecting".into()).await;
        let _ = self.connection.close(200, "reconnecting".into()).await;
    }
}

/// The message body: the envelope (ids, type, sequence) around the row's
/// payload.
pub(super) fn body(row: &OutboxRow) -> Vec<u8> {
    let occurred_at = row.created_at.format(&Rfc3339).unwrap_or_default();
    let envelope = json!({
        "id": row.id,
        "type": row.kind,
        "event_id": row.event_id,
        "order_id": row.order_id,
        "ticket_type_id": row.ticket_type_id,
        "sequence": row.sequence,
        "occurred_at": occurred_at,
        "data": row.payload,
    });
    envelope.to_string().into_bytes()
}

/// AMQP properties: the message id, type, time and the ids as headers, so
/// consumers can route and drop duplicates without parsing the body.
fn properties(row: &OutboxRow) -> BasicProperties {
    let mut headers = FieldTable::default();
    headers.insert(
        "event_id".into(),
        AMQPValue::LongString(row.event_id.to_string().into()),
    );
    if let Some(order_id) = row.order_id {
        headers.insert(
            "order_id".into(),
            AMQPValue::LongString(order_id.to_string().into()),
        );
    }
    if let Some(ticket_type_id) = row.ticket_type_id {
        headers.insert(
            "ticket_type_id".into(),
            AMQPValue::LongString(ticket_type_id.to_string().into()),
        );
    }
    headers.insert("sequence".into(), AMQPValue::LongLongInt(row.sequence));
    BasicProperties::default()
        .with_message_id(row.id.to_string().into())
        .with_type(row.kind.as_str().into())
        .with_content_type("application/json".into())
        .with_delivery_mode(PERSISTENT)
        .with_timestamp(row.created_at.unix_timestamp().max(0) as u64)
        .with_app_id("stampede".into())
        .with_headers(headers)
}
