//! The Stripe client against localstripe (a fake Stripe API, started here
//! on a free loopback port) and against a scripted server for the retries.

use std::{
    net::{Ipv4Addr, TcpListener as StdListener},
    sync::{Arc, Mutex},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use axum::{
    Router,
    http::{HeaderMap, StatusCode},
    routing::post,
};
use stampede::payments::stripe::{IntentStatus, Stripe, StripeConfig, StripeError};
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::common::localstripe::{LocalStripe, SECRET_KEY};

const WEBHOOK_SECRET: &str = "whsec_stampede_test";

fn stripe_at(base: &str) -> Stripe {
    Stripe::new(StripeConfig {
        secret_key: SECRET_KEY.into(),
        webhook_secret: WEBHOOK_SECRET.into(),
        api_base: base.parse().unwrap(),
        requests_per_second: 25,
        // localstripe answers 400 to a PaymentIntent's description.
        send_description: false,
    })
    .unwrap()
}

/// A port nothing listens on, for a moment.
fn free_port() -> u16 {
    let listener = StdListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    listener.local_addr().unwrap().port()
}

fn unix_now() -> i64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    now.as_secs().try_into().unwrap()
}

/// A loopback endpoint that hands each webhook delivery to the test.
async fn webhook_receiver() -> (String, mpsc::UnboundedReceiver<(HeaderMap, Vec<u8>)>) {
    let (sender, receiver) = mpsc::unbounded_channel();
    let app = Router::new().route(
        "/hook",
        post(move |headers: HeaderMap, body: axum::body::Bytes| {
            let sender = sender.clone();
            async move {
                let _ = sender.send((headers, body.to_vec()));
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, receiver)
}

#[tokio::test]
async fn pays_verifies_the_webhook_and_refunds_once() {
    let server = LocalStripe::start();
    let stripe = stripe_at(&server.base);
    let (hook_url, mut deliveries) = webhook_receiver().await;
    server
        .post(
            "/_config/webhooks/stampede",
            &[
                ("url", &hook_url),
                ("secret", WEBHOOK_SECRET),
                ("events[]", "payment_intent.succeeded"),
            ],
        )
        .await;

    let order_id = Uuid::new_v4();
    let created = stripe
        .create_payment_intent(order_id, 2500, "JPY", "2 tickets")
        .await
        .unwrap();
    assert_eq!(created.status, IntentStatus::RequiresPaymentMethod);
    assert!(created.client_secret.is_some());
    assert_eq!(created.order_id, Some(order_id));
    // Nothing to refund yet.
    assert!(matches!(
        stripe.refund(&created.id, order_id).await,
        Err(StripeError::NotRefundable { .. })
    ));

    server.pay(&created.id).await;
    let paid = stripe.retrieve_payment_intent(&created.id).await.unwrap();
    assert_eq!(paid.status, IntentStatus::Succeeded);
    assert_eq!((paid.amount, paid.currency.as_str()), (2500, "JPY"));
    assert_eq!(paid.order_id, Some(order_id));

    // localstripe signs as Stripe does; our verification accepts it.
    let (headers, body) = tokio::time::timeout(Duration::from_secs(10), deliveries.recv())
        .await
        .expect("no webhook within 10 s")
        .unwrap();
    let signature = headers.get("stripe-signature").unwrap().to_str().unwrap();
    let event = stripe
        .verify_webhook(Some(signature), &body, unix_now())
        .unwrap();
    assert_eq!(event.kind, "payment_intent.succeeded");
    let intent = event.payment_intent.unwrap();
    assert_eq!(
        (intent.id.as_str(), intent.status),
        (created.id.as_str(), IntentStatus::Succeeded)
    );
    assert_eq!(intent.order_id, Some(order_id));
    let mut tampered = body.clone();
    tampered.push(b' ');
    assert!(
        stripe
            .verify_webhook(Some(signature), &tampered, unix_now())
            .is_err()
    );

    // Another order cannot refund this intent.
    assert!(matches!(
        stripe.refund(&created.id, Uuid::new_v4()).await,
        Err(StripeError::WrongOrder { .. })
    ));
    // Twice, as after a crash before our commit: one refund.
    let first = stripe.refund(&created.id, order_id).await.unwrap();
    let second = stripe.refund(&created.id, order_id).await.unwrap();
    assert_eq!(first, second);
    assert_eq!((first.amount, first.status.as_str()), (2500, "succeeded"));
    let refunds = server
        .get(&format!("/v1/refunds?payment_intent={}", created.id))
        .await;
    assert_eq!(refunds["data"].as_array().unwrap().len(), 1);
    let charge = &server
        .get(&format!("/v1/payment_intents/{}", created.id))
        .await["latest_charge"];
    assert_eq!(charge["refunded"], true);
    assert_eq!(charge["amount_refunded"], 2500);
}

#[tokio::test]
async fn amounts_pass_through_in_minor_units() {
    let server = LocalStripe::start();
    let stripe = stripe_at(&server.base);
    // KWD has three decimals (25.500), JPY none, EUR two.
    for (amount, currency) in [(25_500, "KWD"), (2_500, "jpy"), (1_999, "EUR")] {
        let order_id = Uuid::new_v4();
        let intent = stripe
            .create_payment_intent(order_id, amount, currency, "tickets")
            .await
            .unwrap();
        let sent = server
            .get(&format!("/v1/payment_intents/{}", intent.id))
            .await;
        assert_eq!(sent["amount"], amount);
        assert_eq!(sent["currency"], currency.to_ascii_lowercase());
        assert_eq!(sent["metadata"]["order_id"], order_id.to_string());
        server.pay(&intent.id).await;
        let paid = stripe.retrieve_payment_intent(&intent.id).await.unwrap();
        assert_eq!(paid.status, IntentStatus::Succeeded);
        assert_eq!(paid.amount, amount);
        assert_eq!(paid.currency, currency.to_ascii_uppercase());
    }
    assert!(matches!(
        stripe.retrieve_payment_intent("pi_nope").await,
        Err(StripeError::Api { status: 404, .. })
    ));
}

/// What the scripted server saw of one request.
#[derive(Debug, Clone)]
struct Seen {
    idempotency_key: Option<String>,
    authorization: Option<String>,
    body: String,
}

/// Answers POST /v1/payment_intents with `statuses` in turn (the last one
/// forever after), recording every request.
async fn scripted(statuses: Vec<u16>) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let app = Router::new().route(
        "/v1/payment_intents",
        post(move |headers: HeaderMap, body: String| {
            let log = Arc::clone(&log);
            let statuses = statuses.clone();
            async move {
                let header = |name: &str| Some(headers.get(name)?.to_str().ok()?.to_owned());
                let mut log = log.lock().unwrap();
                log.push(Seen {
                    idempotency_key: header("idempotency-key"),
                    authorization: header("authorization"),
                    body,
                });
                let status = statuses[(log.len() - 1).min(statuses.len() - 1)];
                let json = if status == 200 {
                    r#"{"id":"pi_1","object":"payment_intent","client_secret":"s","status":"requires_payment_method","amount":100,"currency":"eur","metadata":{}}"#
                } else {
                    r#"{"error":{"message":"scripted","type":"api_error"}}"#
                };
                (
                    StatusCode::from_u16(status).unwrap(),
                    [("retry-after", "0")],
                    json,
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, seen)
}

#[tokio::test]
async fn retries_a_create_with_the_same_idempotency_key() {
    let (base, seen) = scripted(vec![503, 429, 200]).await;
    let order_id = Uuid::new_v4();
    let intent = stripe_at(&base)
        .create_payment_intent(order_id, 100, "EUR", "x")
        .await
        .unwrap();
    assert_eq!(intent.id, "pi_1");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3);
    let key = format!("stampede-pi-{order_id}");
    for attempt in &seen {
        assert_eq!(attempt.idempotency_key.as_deref(), Some(key.as_str()));
        assert_eq!(attempt.body, seen[0].body);
        assert!(
            attempt
                .authorization
                .as_deref()
                .unwrap()
                .starts_with("Basic ")
        );
    }
    let body = &seen[0].body;
    assert!(body.contains("amount=100&currency=eur&"), "{body}");
    assert!(
        body.contains(&format!("metadata%5Border_id%5D={order_id}")),
        "{body}"
    );
    assert!(body.contains("payment_method_types%5B%5D=card"), "{body}");
}

#[tokio::test]
async fn gives_up_after_four_attempts_and_never_retries_a_refusal() {
    let (base, seen) = scripted(vec![500]).await;
    let result = stripe_at(&base)
        .create_payment_intent(Uuid::new_v4(), 100, "EUR", "x")
        .await;
    assert!(
        matches!(result, Err(StripeError::Exhausted { attempts: 4, .. })),
        "{result:?}"
    );
    assert_eq!(seen.lock().unwrap().len(), 4);

    let (base, seen) = scripted(vec![402]).await;
    let result = stripe_at(&base)
        .create_payment_intent(Uuid::new_v4(), 100, "EUR", "x")
        .await;
    assert!(
        matches!(&result, Err(StripeError::Api { status: 402, message }) if message.contains("scripted")),
        "{result:?}"
    );
    assert_eq!(seen.lock().unwrap().len(), 1);

    // Nothing listens: transport errors are retried, then reported.
    let result = stripe_at(&format!("http://127.0.0.1:{}", free_port()))
        .retrieve_payment_intent("pi_1")
        .await;
    assert!(
        matches!(result, Err(StripeError::Exhausted { attempts: 4, .. })),
        "{result:?}"
    );
}
