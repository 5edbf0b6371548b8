//! localstripe (a stateful fake of Stripe's API that sends signed
//! webhooks), one process per test on a free loopback port; and what a
//! buyer's browser would do at Stripe (pay with the 4242 card).

use std::{
    net::{Ipv4Addr, SocketAddr, TcpListener as StdListener, TcpStream},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;

/// localstripe 1.15.10, from the virtualenv `scripts/localstripe` makes
/// (`scripts/test` installs it up front).
const LOCALSTRIPE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/localstripe");
pub const SECRET_KEY: &str = "sk_test_stampede";
pub const PUBLISHABLE_KEY: &str = "pk_test_stampede";

/// A localstripe process of this test's own, killed on drop.
pub struct LocalStripe {
    child: Child,
    pub base: String,
}

impl LocalStripe {
    /// A fresh one on a free loopback port (it installs itself on first
    /// use; that may take a while).
    pub fn start() -> Self {
        // The free port may be taken by another test between our probe and
        // localstripe's bind: it then exits, and we try another port.
        for _ in 0..3 {
            if let Some(server) = Self::start_on(free_port()) {
                return server;
            }
        }
        panic!("localstripe exited at start three times");
    }

    /// On `port`; `None` if it exited before listening.
    fn start_on(port: u16) -> Option<Self> {
        let child = Command::new(LOCALSTRIPE)
            .args(["--port", &port.to_string(), "--from-scratch"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start localstripe");
        let mut server = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if server.child.try_wait().ok().flatten().is_some() {
                return None;
            }
            assert!(Instant::now() < deadline, "localstripe did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(server)
    }

    /// What Stripe.js does when the buyer pays with the 4242 card.
    pub async fn pay(&self, intent_id: &str) {
        let pm = self
            .post(
                "/v1/payment_methods",
                &[
                    ("type", "card"),
                    ("card[number]", "4242424242424242"),
                    ("card[exp_month]", "12"),
                    ("card[exp_year]", "2030"),
                    ("card[cvc]", "123"),
                ],
            )
            .await;
        let pm = pm["id"].as_str().unwrap();
        let updated = self
            .post(
                &format!("/v1/payment_intents/{intent_id}"),
                &[("payment_method", pm)],
            )
            .await;
        assert_eq!(updated["status"], "requires_confirmation");
        let confirmed = self
            .post(&format!("/v1/payment_intents/{intent_id}/confirm"), &[])
            .await;
        assert_eq!(confirmed["status"], "succeeded");
    }

    pub async fn post(&self, path: &str, form: &[(&str, &str)]) -> Value {
        self.call(reqwest::Method::POST, path, form).await
    }

    pub async fn get(&self, path: &str) -> Value {
        self.call(reqwest::Method::GET, path, &[]).await
    }

    /// Straight to localstripe, as the buyer's browser or a test would.
    async fn call(&self, method: reqwest::Method, path: &str, form: &[(&str, &str)]) -> Value {
        let url = format!("{}{path}", self.base);
        let mut request = reqwest::Client::new().request(method, url);
        if !form.is_empty() {
            request = request.form(form);
        }
        let response = request.basic_auth(SECRET_KEY, None::<&str>).send().await;
        let response = response.unwrap();
        assert!(response.status().is_success(), "{path}: {response:?}");
        // `/_config/...` answers with no body.
        let body = response.bytes().await.unwrap();
        if body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&body).unwrap()
        }
    }
}

impl Drop for LocalStripe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let listener = StdListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    listener.local_addr().unwrap().port()
}

impl LocalStripe {
    /// Have localstripe send every `payment_intent.*` event to `url`,
    /// signed with `secret` (its webhook list is this process's own).
    pub async fn send_webhooks_to(&self, url: &str, secret: &str) {
        self.post(
            "/_config/webhooks/stampede",
            &[
                ("url", url),
                ("secret", secret),
                ("events[]", "payment_intent.succeeded"),
                ("events[]", "payment_intent.payment_failed"),
            ],
        )
        .await;
    }
}

/// A loopback proxy in front of localstripe that counts the app's calls
/// and makes chosen ones fail: Stripe's 429s and 500s, which localstripe
/// never gives.
#[derive(Clone)]
pub struct StripeProxy {
    pub base: String,
    state: std::sync::Arc<ProxyState>,
}

struct ProxyState {
    upstream: String,
    client: reqwest::Client,
    /// Calls seen, as "METHOD /path".
    calls: std::sync::Mutex<Vec<String>>,
    /// Fail every `n`-th of the first `up_to` `POST /v1/refunds` with 500
    /// (0: never).
    fail_every_refund: std::sync::atomic::AtomicUsize,
    fail_up_to: std::sync::atomic::AtomicUsize,
    refunds_seen: std::sync::atomic::AtomicUsize,
    /// Armed: the next refund's answer from Stripe is swallowed (the app
    /// never hears it) and the test is told.
    hold_next_refund: std::sync::Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
}

impl StripeProxy {
    pub async fn start(upstream: &LocalStripe) -> Self {
        use axum::{
            Router,
            extract::State,
            http::{Method, StatusCode},
            routing::any,
        };
        let state = std::sync::Arc::new(ProxyState {
            upstream: upstream.base.clone(),
            client: reqwest::Client::new(),
            calls: std::sync::Mutex::default(),
            fail_every_refund: std::sync::atomic::AtomicUsize::new(0),
            fail_up_to: std::sync::atomic::AtomicUsize::new(0),
            refunds_seen: std::sync::atomic::AtomicUsize::new(0),
            hold_next_refund: std::sync::Mutex::default(),
        });
        async fn forward(
            State(state): State<std::sync::Arc<ProxyState>>,
            request: axum::extract::Request,
        ) -> axum::response::Response {
            use std::sync::atomic::Ordering;
            let method = request.method().clone();
            let path = request.uri().path().to_owned();
            let target = format!(
                "{}{}",
                state.upstream,
                request.uri().path_and_query().map_or("/", |p| p.as_str())
            );
            state.calls.lock().unwrap().push(format!("{method} {path}"));
            let refund = method == Method::POST && path == "/v1/refunds";
            if refund {
                let seen = state.refunds_seen.fetch_add(1, Ordering::SeqCst) + 1;
                let every = state.fail_every_refund.load(Ordering::SeqCst);
                let up_to = state.fail_up_to.load(Ordering::SeqCst);
                if every > 0 && seen % every == 0 && seen <= up_to {
                    return (
                        StatusCode::INTERNAL_SERVER_ERROR,
                        r#"{"error":{"message":"injected","type":"api_error"}}"#,
                    )
                        .into_response();
                }
            }
            let headers = request.headers().clone();
            let body = axum::body::to_bytes(request.into_body(), 1 << 20)
                .await
                .unwrap();
            let mut upstream = state.client.request(method, target).body(body);
            for name in ["authorization", "content-type", "idempotency-key"] {
                if let Some(value) = headers.get(name) {
                    upstream = upstream.header(name, value);
                }
            }
            let answer = upstream.send().await.unwrap();
            let status = answer.status().as_u16();
            let bytes = answer.bytes().await.unwrap();
            let held = refund.then(|| state.hold_next_refund.lock().unwrap().take());
            if let Some(Some(tell)) = held {
                // Stripe has made the refund; the app never hears of it.
                let _ = tell.send(());
                std::future::pending::<()>().await;
            }
            (
                StatusCode::from_u16(status).unwrap(),
                [("content-type", "application/json")],
                bytes,
            )
                .into_response()
        }
        use axum::response::IntoResponse;
        let app = Router::new()
            .fallback(any(forward))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { base, state }
    }

    /// Calls the app made, as "METHOD /path", matching `prefix`.
    pub fn calls(&self, prefix: &str) -> usize {
        let calls = self.state.calls.lock().unwrap();
        calls.iter().filter(|c| c.starts_with(prefix)).count()
    }

    /// Every `n`-th of the next `up_to` refunds the app asks for fails.
    pub fn fail_every_refund(&self, n: usize, up_to: usize) {
        use std::sync::atomic::Ordering;
        let seen = self.state.refunds_seen.load(Ordering::SeqCst);
        self.state.fail_up_to.store(seen + up_to, Ordering::SeqCst);
        self.state.fail_every_refund.store(n, Ordering::SeqCst);
    }

    /// The next refund is made at Stripe but its answer never reaches the
    /// app; the receiver hears when Stripe has answered.
    pub fn swallow_next_refund(&self) -> tokio::sync::oneshot::Receiver<()> {
        let (tell, told) = tokio::sync::oneshot::channel();
        *self.state.hold_next_refund.lock().unwrap() = Some(tell);
        told
    }
}
