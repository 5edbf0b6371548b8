//! A shop that sells paid tickets: an event whose money Stripe takes, a
//! `stampede serve` connected to localstripe through a counting proxy, and
//! what a buyer does (buy with the form, open the pay page, pay), with the
//! money invariants read from the tables.

use std::time::{Duration, Instant};

use sqlx::{PgPool, postgres::PgConnectOptions};
use uuid::Uuid;

use crate::common::{
    self, Fixture, TicketSpec, database_url,
    localstripe::{LocalStripe, PUBLISHABLE_KEY, SECRET_KEY, StripeProxy},
    process::ServerProcess,
    smtp::Sink,
};

pub const WEBHOOK_SECRET: &str = "whsec_stampede_shop";

pub struct PaidShop {
    pub pool: PgPool,
    pub fixture: Fixture,
    pub stripe: LocalStripe,
    pub proxy: StripeProxy,
    pub server: ServerProcess,
    args: Vec<String>,
    url: String,
    /// Where the app's mails arrive.
    pub mails: Sink,
    client: reqwest::Client,
}

/// A bought order: its id and the cancel secret of the page it led to.
pub struct Bought {
    pub id: Uuid,
    pub secret: String,
}

impl PaidShop {
    /// `capacity` tickets at 25.00 EUR, one per order and up to two per
    /// buyer; Stripe's webhook reaches the app if `webhooks`.
    /// The reconciler runs every second: its first look, and the closer's
    /// grace, come after four.
    pub async fn open(connect: &PgConnectOptions, capacity: i64, webhooks: bool) -> Self {
        let pool = common::pool(connect.clone(), 4).await;
        let fixture = common::published_event(&pool, &[TicketSpec::new(capacity, 1, 2)]).await;
        sqlx::query("UPDATE events SET payment = 'stripe' WHERE id = $1")
            .bind(fixture.event_id)
            .execute(&pool)
            .await
            .unwrap();
        let stripe = LocalStripe::start();
        let proxy = StripeProxy::start(&stripe).await;
        let js = format!("{}/js.stripe.com/v3/", stripe.base);
        let mails = Sink::start().await;
        let smtp = mails.url();
        let args: Vec<String> = [
            "--stripe-secret-key",
            SECRET_KEY,
            "--stripe-publishable-key",
            PUBLISHABLE_KEY,
            "--stripe-webhook-secret",
            WEBHOOK_SECRET,
            "--stripe-api-base",
            &proxy.base,
            "--stripe-js-url",
            &js,
            "--stripe-no-description",
            "--stripe-reconcile-secs",
            "1",
            "--smtp-url",
            &smtp,
            // Every buyer of these tests is 127.0.0.1.
            "--purchase-burst-per-ip",
            "0",
            "--held-per-address",
            "0",
        ]
        .map(str::to_owned)
        .to_vec();
        let url = database_url(connect);
        let server = Self::serve(&url, &args).await;
        if webhooks {
            let url = server.url("/payments/stripe/webhook");
            stripe.send_webhooks_to(&url, WEBHOOK_SECRET).await;
        }
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        Self {
            pool,
            fixture,
            stripe,
            proxy,
            server,
            args,
            url,
            mails,
            client,
        }
    }

    async fn serve(url: &str, args: &[String]) -> ServerProcess {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ServerProcess::start(url, &args).await
    }

    /// Kill the app (SIGKILL) and start it again; Stripe's webhooks follow.
    pub async fn restart(&mut self) {
        self.server.kill();
        self.server = Self::serve(&self.url, &self.args).await;
        let url = self.server.url("/payments/stripe/webhook");
        self.stripe.send_webhooks_to(&url, WEBHOOK_SECRET).await;
    }

    pub fn ticket_type(&self) -> Uuid {
        self.fixture.ticket_type_ids[0]
    }

    /// Buy one ticket with the event page's form.
    pub async fn buy(&self, email: &str) -> Bought {
        let tt = self.ticket_type().to_string();
        let key = Uuid::new_v4().to_string();
        let body = common::form_body(&[
            ("ticket_type_id", &tt),
            ("quantity", "1"),
            ("email", email),
            ("idempotency_key", &key),
        ]);
        let send = || {
            self.client
                .post(
                    self.server
                        .url(&format!("/events/{}/orders", self.fixture.event_id)),
                )
                .header("content-type", "application/x-www-form-urlencoded")
                .header("cookie", common::csrf_cookie())
                .body(body.clone())
                .send()
        };
        let mut answer = send().await.unwrap();
        // Stock a test gave back from its own process (a sweep) reaches the
        // server's local sold-out flag by Postgres's NOTIFY, a moment
        // later: until then a buy is `sold_out` (409). The same key again,
        // for at most 2 s; anything else fails at once.
        for _ in 0..40 {
            if answer.status() != 409 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            answer = send().await.unwrap();
        }
        assert_eq!(answer.status(), 303, "{email}: {:?}", answer.text().await);
        let to = answer.headers()["location"].to_str().unwrap().to_owned();
        let (path, query) = to.split_once("?s=").unwrap();
        Bought {
            id: path.trim_start_matches("/orders/").parse().unwrap(),
            secret: query.to_owned(),
        }
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client.get(self.server.url(path)).send().await.unwrap()
    }

    /// Open the order's pay page: the intent's id, from its client secret.
    pub async fn open_payment(&self, order: &Bought) -> String {
        let page = self
            .get(&format!("/orders/{}/pay?s={}", order.id, order.secret))
            .await;
        assert_eq!(page.status(), 200);
        let html = page.text().await.unwrap();
        let secret = html
            .split("data-client-secret=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap();
        secret.split("_secret_").next().unwrap().to_owned()
    }

    /// Buy, open the pay page and pay at Stripe.
    pub async fn buy_and_pay(&self, email: &str) -> (Bought, String) {
        let order = self.buy(email).await;
        let intent = self.open_payment(&order).await;
        self.stripe.pay(&intent).await;
        (order, intent)
    }

    pub async fn order_status(&self, order: Uuid) -> String {
        sqlx::query_scalar("SELECT status FROM orders WHERE id = $1")
            .bind(order)
            .fetch_one(&self.pool)
            .await
            .unwrap()
    }

    /// Wait (`within` at most) until `sql` (one bool; no row or NULL is false)
    /// is true.
    pub async fn wait_until(&self, what: &str, sql: &str) {
        self.wait_within(Duration::from_secs(20), what, sql).await;
    }

    pub async fn wait_within(&self, within: Duration, what: &str, sql: &str) {
        let deadline = Instant::now() + within;
        loop {
            let done: bool = sqlx::query_scalar(&format!("SELECT COALESCE(({sql}), false)"))
                .fetch_one(&self.pool)
                .await
                .unwrap();
            if done {
                return;
            }
            assert!(Instant::now() < deadline, "never: {what}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Wait until the order is confirmed.
    pub async fn wait_confirmed(&self, order: Uuid, what: &str) {
        let sql = format!("SELECT status = 'confirmed' FROM orders WHERE id = '{order}'");
        self.wait_until(what, &sql).await;
    }

    /// Outbox rows of `kind` for the order.
    pub async fn messages(&self, order: Uuid, kind: &str) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM outbox WHERE order_id = $1 AND kind = $2")
            .bind(order)
            .bind(kind)
            .fetch_one(&self.pool)
            .await
            .unwrap()
    }
}

/// The money invariants, from the tables, once no refund is due:
/// - captured − refunded = the totals of the confirmed paid orders;
/// - no confirmed paid order without a captured payment;
/// - no captured payment of an order without a ticket that was not
///   refunded;
///
/// and every stock invariant.
pub async fn assert_money(pool: &PgPool) {
    let (captured, refunded, confirmed): (i64, i64, i64) = sqlx::query_as(
        "SELECT COALESCE((SELECT sum(amount_minor) FROM payments WHERE status = 'succeeded'), 0)::int8,
                COALESCE((SELECT sum(amount_minor) FROM payments WHERE refund = 'done'), 0)::int8,
                COALESCE((SELECT sum(o.unit_price_minor * o.quantity) FROM orders o
                          JOIN ticket_types t ON t.id = o.ticket_type_id
                          JOIN events e ON e.id = t.event_id
                          WHERE o.status = 'confirmed' AND o.unit_price_minor > 0
                            AND e.payment = 'stripe'), 0)::int8",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(
        captured - refunded,
        confirmed,
        "captured − refunded = confirmed paid"
    );
    let unpaid: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM orders o JOIN ticket_types t ON t.id = o.ticket_type_id
         JOIN events e ON e.id = t.event_id
         WHERE o.status = 'confirmed' AND o.unit_price_minor > 0 AND e.payment = 'stripe'
           AND NOT EXISTS (SELECT 1 FROM payments p
                           WHERE p.order_id = o.id AND p.status = 'succeeded')",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(
        unpaid, 0,
        "confirmed paid orders without a captured payment"
    );
    let kept: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM payments p JOIN orders o ON o.id = p.order_id
         WHERE p.status = 'succeeded' AND o.status <> 'confirmed'
           AND p.refund IS DISTINCT FROM 'done'",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(kept, 0, "money kept for an order without a ticket");
    common::assert_invariants(pool).await;
}
