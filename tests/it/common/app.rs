//! The real app on a loopback port, and the clients that use it: a buyer
//! through the API, a logged-in organizer.

use super::*;

/// Serve the real router for `state` on a random loopback port, through
/// the server `stampede serve` uses.
pub async fn serve(state: AppState) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = stampede::app(state);
    tokio::spawn(stampede::server::serve(
        listener,
        app,
        stampede::server::ConnLimits::default(),
        std::future::pending(),
    ));
    addr
}

/// The metrics listener's app (`--metrics-listen`) on a random loopback
/// port, as `stampede serve` runs it; its address.
pub async fn serve_metrics(pool: &PgPool) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(stampede::server::serve(
        listener,
        stampede::web::metrics_app(pool.clone()),
        stampede::server::ConnLimits::default(),
        std::future::pending(),
    ));
    addr
}

/// One scrape of the metrics (through the metrics listener's app).
pub async fn scrape_metrics(pool: &PgPool) -> String {
    let addr = serve_metrics(pool).await;
    let resp = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .unwrap();
    assert_eq!(resp.status(), reqwest::StatusCode::OK);
    resp.text().await.unwrap()
}

/// The real router served on a random loopback port.
pub struct TestApp {
    pub pool: PgPool,
    pub addr: SocketAddr,
    pub client: reqwest::Client,
    pub clock: ManualClock,
}

impl TestApp {
    pub async fn spawn(pool: PgPool) -> Self {
        Self::spawn_with_limits(pool, stampede::web::Limits::default()).await
    }

    /// For bursts from one loopback address: purchase rate limits per
    /// address off, as for a loopback benchmark.
    pub async fn spawn_for_bursts(pool: PgPool) -> Self {
        let mut limits = stampede::web::Limits::default();
        limits.purchase_rates.per_ip_burst = 0;
        limits.purchase_rates.per_email_burst = 0;
        Self::spawn_with_limits(pool, limits).await
    }

    pub async fn spawn_with_limits(pool: PgPool, limits: stampede::web::Limits) -> Self {
        let clock = ManualClock::new(now());
        // The public list's cache is off here, so that each test sees its
        // writes at once; tests/http/listing.rs turns it on.
        let state = AppState::new(pool.clone())
            .with_clock(clock.clone())
            .with_limits(limits)
            .with_list_cache_ttl(Duration::ZERO)
            .with_rooms(test_rooms(
                stampede::waiting_room::RoomKey::random(),
                stampede::waiting_room::DEFAULT_ENTRIES_PER_CLIENT,
            ));
        Self::spawn_state(pool, clock, state).await
    }

    /// The app for `state`, which must use `clock`.
    pub async fn spawn_state(pool: PgPool, clock: ManualClock, state: AppState) -> Self {
        let addr = serve(state).await;
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .pool_max_idle_per_host(256)
            .build()
            .unwrap();
        Self {
            pool,
            addr,
            client,
            clock,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// POST a form with a valid CSRF cookie and field.
    pub async fn post_form(&self, path: &str, fields: &[(&str, &str)]) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("cookie", csrf_cookie())
            .body(form_body(fields))
            .send()
            .await
            .unwrap()
    }

    /// Sign up an organizer through the real pages, with its address
    /// confirmed (as following the mailed link does; tests/it/http/accounts/
    /// email_confirmation.rs follows the real link), and return a client
    /// that carries its session (and CSRF) cookies, plus its API token.
    pub async fn organizer(&self, email: &str) -> Organizer {
        let organizer = self.unconfirmed_organizer(email).await;
        let confirmed =
            sqlx::query("UPDATE organizers SET email_confirmed_at = now() WHERE id = $1")
                .bind(organizer.id)
                .execute(&self.pool)
                .await
                .unwrap();
        assert_eq!(confirmed.rows_affected(), 1);
        organizer
    }

    /// [`Self::organizer`] before it follows the mailed link: it may not
    /// publish.
    pub async fn unconfirmed_organizer(&self, email: &str) -> Organizer {
        let cookies = std::sync::Arc::new(reqwest::cookie::Jar::default());
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .cookie_provider(std::sync::Arc::clone(&cookies))
            .build()
            .unwrap();
        let page = client.get(self.url("/signup")).send().await.unwrap();
        let token = csrf_from_page(&page.text().await.unwrap());
        let password = "correct horse battery staple";
        let body = forms::with_csrf(&[("email", email), ("password", password)], &token);
        let signed_up = client
            .post(self.url("/signup"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(signed_up.status(), 303, "sign-up of {email} failed");
        let pool = self.pool.clone();
        let id: Uuid = sqlx::query_scalar("SELECT id FROM organizers WHERE email = $1")
            .bind(email)
            .fetch_one(&pool)
            .await
            .unwrap();
        let api_token = stampede::auth::create_token(&pool, id.into(), "tests")
            .await
            .unwrap();
        Organizer {
            id,
            client,
            cookies,
            csrf: token,
            api_token,
            base: self.url(""),
        }
    }
}

/// Buy through the JSON API, expecting success; returns the order id.
pub async fn api_buy(app: &TestApp, ticket_type_id: Uuid, quantity: i64, email: &str) -> Uuid {
    api_buy_with_secret(app, ticket_type_id, quantity, email)
        .await
        .0
}

/// Buy through the JSON API, expecting success; returns the order id and the
/// cancel secret the creating answer carries.
pub async fn api_buy_with_secret(
    app: &TestApp,
    ticket_type_id: Uuid,
    quantity: i64,
    email: &str,
) -> (Uuid, String) {
    let resp = app
        .client
        .post(app.url("/api/v1/orders"))
        .json(&json!({
            "ticket_type_id": ticket_type_id,
            "quantity": quantity,
            "email": email,
            "idempotency_key": Uuid::new_v4().to_string(),
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), reqwest::StatusCode::CREATED);
    let body: Value = resp.json().await.unwrap();
    let id = Uuid::parse_str(body["id"].as_str().unwrap()).unwrap();
    (id, body["cancel_secret"].as_str().unwrap().to_owned())
}

/// A logged-in organizer: a cookie-carrying client and an API token.
pub struct Organizer {
    pub id: Uuid,
    pub client: reqwest::Client,
    /// The client's cookies (the session), for requests made without it.
    pub cookies: std::sync::Arc<reqwest::cookie::Jar>,
    pub csrf: String,
    pub api_token: String,
    base: String,
}

impl Organizer {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The `Cookie` header the client sends (the session's), for a raw
    /// request.
    pub fn cookie_header(&self) -> String {
        use reqwest::cookie::CookieStore as _;
        let url = self.url("/").parse().unwrap();
        self.cookies
            .cookies(&url)
            .map(|value| value.to_str().unwrap().to_owned())
            .unwrap_or_default()
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client.get(self.url(path)).send().await.unwrap()
    }

    /// POST a form from this organizer's browser, CSRF field included.
    pub async fn post_form(&self, path: &str, fields: &[(&str, &str)]) -> reqwest::Response {
        let body = forms::with_csrf(fields, &self.csrf);
        self.client
            .post(self.url(path))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap()
    }

    /// A JSON request with this organizer's bearer token.
    pub fn api(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.client
            .request(method, self.url(path))
            .bearer_auth(&self.api_token)
    }
}

/// The CSRF token a rendered page embeds in its forms.
pub fn csrf_from_page(html: &str) -> String {
    let marker = format!("name=\"{}\" value=\"", stampede::web::csrf::FIELD);
    let start = html.find(&marker).expect("page has a CSRF field") + marker.len();
    html[start..].split('"').next().unwrap().to_owned()
}

/// Wait until `n` backends of this database have run LISTEN, and a moment
/// more for what follows it (the gate rebuilds what it has seen).
pub async fn until_listening(pool: &PgPool, n: i64) {
    for _ in 0..500 {
        let listening: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND query LIKE 'LISTEN%'",
        )
        .fetch_one(pool)
        .await
        .unwrap();
        if listening >= n {
            tokio::time::sleep(Duration::from_millis(200)).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("fewer than {n} listeners ever started");
}
