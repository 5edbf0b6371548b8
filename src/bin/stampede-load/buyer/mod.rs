//! One virtual buyer: builds each attempt's requests, sends them on its own
//! connection and reduces the answers to an [`Outcome`].

mod answer;

use std::{
    borrow::Cow,
    sync::Arc,
    time::{Duration, Instant},
};

use base64::Engine as _;
use rand::{Rng, RngCore};
use uuid::Uuid;

use crate::{
    cli::Via,
    http::{Conn, Failure, Reply, Request},
    scenario::{Action, Plan},
    setup::Sale,
};

pub use answer::hidden_field;

use answer::{COOKIE, api_outcome, csrf_cookie, expected, form_outcome, refusal_or_failure};

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A purchase answered as a success, with its order id.
    Sold(Uuid),
    /// A GET answered with the expected status.
    Ok,
    /// A clean refusal, by reason (the API's error code, or the form's).
    Refused(Cow<'static, str>),
    /// A time-out, a broken connection, a 5xx or an unexpected answer.
    Failed(Cow<'static, str>),
}

/// What the driver records about one attempt.
pub struct Attempt {
    pub outcome: Outcome,
    /// A purchase whose answer never came (or was a 5xx) may still have
    /// committed: its idempotency key, to explain such an order.
    pub unsure_key: Option<String>,
    /// Form purchases: how long the page and the post took.
    pub page: Option<Duration>,
    pub post: Option<Duration>,
}

impl Attempt {
    fn of(outcome: Outcome) -> Self {
        Self {
            outcome,
            unsure_key: None,
            page: None,
            post: None,
        }
    }
}

/// The paths of one ticket type's event.
struct Paths {
    ticket_type: String,
    page: String,
    form: String,
}

/// What all buyers share.
pub struct Script {
    plan: Arc<Plan>,
    tag: String,
    paths: Vec<Paths>,
}

impl Script {
    pub fn new(plan: Arc<Plan>, sale: &Sale) -> anyhow::Result<Self> {
        let paths: Vec<Paths> = sale
            .ticket_types
            .iter()
            .map(|tt| Paths {
                ticket_type: tt.id.to_string(),
                page: format!("/events/{}", tt.event_id),
                form: format!("/events/{}/orders", tt.event_id),
            })
            .collect();
        if plan.needs_database() {
            anyhow::ensure!(!paths.is_empty(), "the scenario set up no ticket types");
        }
        Ok(Self {
            plan,
            tag: sale.tag.clone(),
            paths,
        })
    }

    /// Which ticket type and how many.
    fn choose(&self) -> (&Paths, u32) {
        let mut rng = rand::rng();
        let tt = &self.paths[rng.random_range(0..self.paths.len())];
        let q = self.plan.quantity;
        (tt, rng.random_range(q.min..=q.max))
    }

    /// Attempt `n`'s buyer: a fresh one every attempt.
    fn email(&self, n: u64) -> String {
        let mut email = String::with_capacity(64);
        self.push_email(&mut email, n);
        email
    }

    fn push_email(&self, out: &mut String, n: u64) {
        out.push_str("buyer-");
        out.push_str(itoa::Buffer::new().format(n));
        out.push('-');
        out.push_str(&self.tag);
        out.push_str("@load.example.org");
    }

    /// The API purchase's JSON body, written into `out` (kept by the buyer
    /// from one attempt to the next). Written by hand, not formatted: the
    /// load generator shares the machine's cores with the server, and each
    /// instruction it spends more on a purchase than on the trivial route's
    /// `GET` shows up as a slower refusal in `bench-gate`'s ratio.
    fn api_body(&self, out: &mut String, tt: &Paths, quantity: u32, n: u64, key: &str) {
        out.clear();
        out.push_str(r#"{"ticket_type_id":""#);
        out.push_str(&tt.ticket_type);
        out.push_str(r#"","quantity":"#);
        out.push_str(itoa::Buffer::new().format(quantity));
        out.push_str(r#","email":""#);
        self.push_email(out, n);
        out.push_str(r#"","idempotency_key":""#);
        out.push_str(key);
        out.push_str(r#""}"#);
    }
}

pub struct Buyer {
    pub conn: Conn,
    script: Arc<Script>,
    /// The API purchase's body, reused.
    body: String,
}

impl Buyer {
    pub fn new(conn: Conn, script: Arc<Script>) -> Self {
        Self {
            conn,
            script,
            body: String::with_capacity(256),
        }
    }

    /// Attempt number `n` (unique across the run), scheduled at `start`.
    pub async fn attempt(&mut self, n: u64, start: Instant) -> Attempt {
        let script = self.script.clone();
        let (path, expect) = match script.plan.action {
            Action::Get { path, expect } => (path, expect),
            Action::Page => (script.paths[0].page.as_str(), 200),
            Action::Buy(Via::Api) => return self.buy_api(&script, n).await,
            Action::Buy(Via::Form) => return self.buy_form(&script, n, start).await,
        };
        let answer = self
            .conn
            .send(&Request::get(path), script.plan.timeout)
            .await;
        Attempt::of(match answer {
            Ok(reply) => expected(&reply, expect),
            Err(failure) => Outcome::Failed(failure.name().into()),
        })
    }

    async fn buy_api(&mut self, script: &Script, n: u64) -> Attempt {
        let (tt, quantity) = script.choose();
        let key = Key::fresh();
        let mut body = std::mem::take(&mut self.body);
        script.api_body(&mut body, tt, quantity, n, key.as_str());
        let request = Request {
            method: "POST",
            path: "/api/v1/orders",
            headers: &[("content-type", "application/json")],
            body: body.as_bytes(),
        };
        let result = self.conn.send(&request, script.plan.timeout).await;
        self.body = body;
        purchase(result, key.as_str(), api_outcome)
    }

    /// As a browser: the page (for the CSRF cookie and the form's token and
    /// idempotency key), then the form post, answered with a 303.
    async fn buy_form(&mut self, script: &Script, n: u64, start: Instant) -> Attempt {
        let (tt, quantity) = script.choose();
        let email = script.email(n);
        let timeout = script.plan.timeout;
        let page = match self.conn.send(&Request::get(&tt.page), timeout).await {
            Ok(reply) if reply.status == 200 => reply,
            Ok(reply) => return Attempt::of(refusal_or_failure(reply.status, "page")),
            Err(failure) => return Attempt::of(Outcome::Failed(failure.name().into())),
        };
        let page_took = start.elapsed();
        let Some(cookie) = csrf_cookie(&page) else {
            return Attempt::of(Outcome::Failed("no_csrf_cookie".into()));
        };
        let html = String::from_utf8_lossy(&page.body);
        // The field repeats the cookie; a sold-out page has no form, and a
        // script posts anyway with the cookie's value and a key of its own.
        let token = hidden_field(&html, "csrf_token").unwrap_or(&cookie[COOKIE.len() + 1..]);
        let key = hidden_field(&html, "idempotency_key").map_or_else(fresh_key, str::to_owned);
        let body = form_urlencoded::Serializer::new(String::with_capacity(256))
            .append_pair("csrf_token", token)
            .append_pair("ticket_type_id", &tt.ticket_type)
            .append_pair("quantity", &quantity.to_string())
            .append_pair("email", &email)
            .append_pair("idempotency_key", &key)
            .finish();
        let headers = [
            ("content-type", "application/x-www-form-urlencoded"),
            ("cookie", cookie.as_str()),
        ];
        let request = Request {
            method: "POST",
            path: &tt.form,
            headers: &headers,
            body: body.as_bytes(),
        };
        let posted = Instant::now();
        let result = self.conn.send(&request, timeout).await;
        let mut attempt = purchase(result, &key, form_outcome);
        attempt.page = Some(page_took);
        attempt.post = Some(posted.elapsed());
        attempt
    }
}

/// A purchase's outcome; keeps the key when the order may have committed
/// without the buyer hearing of it.
fn purchase(result: Result<Reply, Failure>, key: &str, classify: fn(&Reply) -> Outcome) -> Attempt {
    let (outcome, unsure) = match result {
        Ok(reply) => (classify(&reply), reply.status >= 500),
        Err(failure) => (
            Outcome::Failed(failure.name().into()),
            failure != Failure::Connect,
        ),
    };
    let mut attempt = Attempt::of(outcome);
    attempt.unsure_key = unsure.then(|| key.to_owned());
    attempt
}

/// A high-entropy, URL-safe idempotency key: 128 random bits, 22
/// characters, on the stack (a `String` only when it must be kept).
struct Key([u8; 22]);

impl Key {
    fn fresh() -> Self {
        let mut bytes = [0_u8; 16];
        rand::rng().fill_bytes(&mut bytes);
        let mut key = [0_u8; 22];
        // 16 bytes are 22 characters unpadded: the slice always fits.
        let _ = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode_slice(bytes, &mut key);
        Self(key)
    }

    fn as_str(&self) -> &str {
        // base64's alphabet is ASCII.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

pub fn fresh_key() -> String {
    Key::fresh().as_str().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_body_is_the_purchase_as_json() {
        use clap::Parser as _;
        let crate::cli::Command::Run(args) =
            crate::cli::Cli::parse_from(["stampede-load", "run", "sellout"]).command
        else {
            panic!("not a run");
        };
        let script = Script {
            plan: Arc::new(Plan::resolve(&args).unwrap()),
            tag: "t4g".into(),
            paths: Vec::new(),
        };
        let tt = Paths {
            ticket_type: Uuid::nil().to_string(),
            page: String::new(),
            form: String::new(),
        };
        let key = Key::fresh();
        let mut body = String::from("left from the last attempt");
        script.api_body(&mut body, &tt, 3, 12_345, key.as_str());
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "ticket_type_id": Uuid::nil(),
                "quantity": 3,
                "email": "buyer-12345-t4g@load.example.org",
                "idempotency_key": key.as_str(),
            })
        );
        // The form's buyer is the same one.
        assert_eq!(json["email"], script.email(12_345));
    }

    #[test]
    fn fresh_keys_are_long_url_safe_and_distinct() {
        let (a, b) = (fresh_key(), fresh_key());
        assert_eq!(a.len(), 22);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        );
        assert_ne!(a, b);
    }
}
