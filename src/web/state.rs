//! What every handler can reach: the pool, the clock and the limits.

use std::{sync::Arc, time::Duration};

use axum::extract::FromRef;
use sqlx::PgPool;
use tower_sessions_sqlx_store::PostgresStore;

use super::{
    api_rate_limit::ApiRateLimit,
    code_guard::CodeGuard,
    event_cache::EventCache,
    list_cache::ListCache,
    purchase_limits::{PurchaseLimits, PurchaseRates},
};
use crate::{
    clock::{Clock, SystemClock},
    domain::Quotas,
    error::AppError,
    sale::{EngineSettings, Purchase, PurchaseRequest, Sales, Strategy},
};

/// How long a page of the public event list is served from memory.
pub const DEFAULT_LIST_CACHE_TTL: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Requests in flight at once, purchases and `/healthz` aside.
    pub max_in_flight: usize,
    /// Purchases in flight at once (a budget of their own).
    pub max_purchases_in_flight: usize,
    /// Requests in flight per client address (IPv6: per /64); 0 = no cap.
    pub max_in_flight_per_ip: usize,
    /// A request body must arrive whole within this, or the answer is 408.
    pub body_read_timeout: Duration,
    pub request_timeout: Duration,
    /// Log-in attempts per client address: a burst, then one per period.
    pub login_burst: u32,
    pub login_period: Duration,
    /// Purchases per client address and per buyer email.
    pub purchase_rates: PurchaseRates,
    /// Organizer API requests per account and minute; 0 = no limit.
    pub api_requests_per_minute: u32,
    /// How long a CSV export waits for a client that reads nothing before
    /// it is cut off (freeing its slot).
    pub export_stall: Duration,
    /// Failed presale code checks per client address and event before each
    /// further one waits (`super::code_guard`); 0 = no limit.
    pub code_failures_per_ip: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_in_flight: 2048,
            max_purchases_in_flight: 1024,
            max_in_flight_per_ip: 64,
            body_read_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(15),
            login_burst: 10,
            login_period: Duration::from_secs(6),
            purchase_rates: PurchaseRates::default(),
            api_requests_per_minute: super::api_rate_limit::DEFAULT_API_REQUESTS_PER_MINUTE,
            export_stall: super::export::STALL,
            code_failures_per_ip: super::code_guard::DEFAULT_FREE_FAILURES,
        }
    }
}

/// A purchase is sold within two thirds of the request timeout or not at
/// all: the rest is the margin for the commit and the answer, so that no
/// purchase commits after its buyer was told 503.
fn purchase_deadline(limits: &Limits) -> Duration {
    limits.request_timeout * 2 / 3
}

/// What handlers share, behind one `Arc`: axum clones the state for every
/// layer and handler of every request, so a clone is one reference count
/// (a profile of the trivial route showed field-by-field clones and drops
/// at ~6 % of its CPU).
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

#[derive(Clone)]
pub struct Shared {
    pub db: PgPool,
    /// The purchase path (strategy, batch queues, sold-out flags).
    pub sales: Sales,
    /// The event pages' shared data, about a second old at most.
    pub events: EventCache,
    /// Purchases per client address and per buyer email.
    pub purchase_limits: PurchaseLimits,
    pub clock: Arc<dyn Clock>,
    pub limits: Limits,
    /// Mark cookies `Secure` (serve over https).
    pub secure_cookies: bool,
    /// What one organizer may create.
    pub quotas: Quotas,
    /// The public event list's short shared cache.
    pub public_list: Arc<ListCache>,
    /// The organizer API's requests per account.
    pub api_rate: ApiRateLimit,
    /// Webhook URLs may point at loopback and private addresses.
    pub webhooks_allow_private: bool,
    /// Failed presale code checks per client address and event.
    pub code_guard: CodeGuard,
    /// Stripe, if connected (`crate::payments`).
    pub payments: Option<crate::payments::Payments>,
    /// The zone of events whose organizer names none.
    pub time_zone: crate::domain::Zone,
    /// Where buyers reach the site (`--public-url`): the links in files.
    pub public_url: String,
    /// Shutting down: `/readyz` answers 503 so that the balancer stops
    /// sending buyers here before the listener closes.
    pub draining: Arc<std::sync::atomic::AtomicBool>,
}

impl AppState {
    /// A buyer's purchase (form or API), behind the buyer's rate limit,
    /// which a refusal of a type known sold out does not spend.
    /// With a presale code, behind the code guard: per client address and
    /// event (the API names no event: per ticket type).
    pub async fn purchase(&self, request: &PurchaseRequest) -> Result<Purchase, AppError> {
        let now = self.clock.now();
        let coded = request.presale_code.is_some();
        let scope = request
            .event_id
            .map_or(request.ticket_type_id.get(), |event| event.get());
        if coded {
            self.code_guard.check(request.client, scope, now)?;
        }
        let result = self
            .sales
            .purchase_limited(now, request, |request| {
                self.purchase_limits.check_email(&request.email)
            })
            .await;
        // Refused for its code (unknown, used up, not for this type or not
        // now: one answer); a code with too few uses left was a right guess.
        if coded && matches!(&result, Err(AppError::Invalid(f)) if f.field == "presale_code") {
            self.code_guard.failed(request.client, scope, now);
        }
        result
    }

    pub fn new(db: PgPool) -> Self {
        Self(Arc::new(Shared {
            sales: Sales::new(db.clone(), Strategy::default(), EngineSettings::default()),
            events: EventCache::new(),
            purchase_limits: PurchaseLimits::new(Limits::default().purchase_rates),
            db,
            clock: Arc::new(SystemClock),
            limits: Limits::default(),
            secure_cookies: false,
            quotas: Quotas::default(),
            public_list: Arc::new(ListCache::new(DEFAULT_LIST_CACHE_TTL)),
            api_rate: ApiRateLimit::new(Limits::default().api_requests_per_minute),
            webhooks_allow_private: false,
            code_guard: CodeGuard::new(Limits::default().code_failures_per_ip),
            payments: None,
            time_zone: crate::domain::Zone::utc(),
            public_url: "http://localhost".to_owned(),
            draining: Arc::default(),
        }))
    }

    /// For the builder methods, before the state is shared.
    fn shared_mut(&mut self) -> &mut Shared {
        Arc::make_mut(&mut self.0)
    }

    pub fn with_quotas(mut self, quotas: Quotas) -> Self {
        self.shared_mut().quotas = quotas;
        self
    }

    /// Where buyers reach the site, and the zone of events that name none.
    pub fn with_site(mut self, public_url: &str, zone: crate::domain::Zone) -> Self {
        let shared = self.shared_mut();
        shared.public_url = public_url.trim_end_matches('/').to_owned();
        shared.time_zone = zone;
        self
    }

    /// Paid tickets through Stripe; events that need it may be published.
    pub fn with_payments(mut self, payments: crate::payments::Payments) -> Self {
        let shared = self.shared_mut();
        shared.quotas.stripe_connected = true;
        shared.payments = Some(payments);
        self
    }

    /// Serve pages of the public list from memory for `ttl` (zero: never).
    pub fn with_list_cache_ttl(mut self, ttl: Duration) -> Self {
        self.shared_mut().public_list = Arc::new(ListCache::new(ttl));
        self
    }

    pub fn with_clock(mut self, clock: impl Clock) -> Self {
        self.shared_mut().clock = Arc::new(clock);
        self
    }

    /// The sale path; its deadline follows the request timeout of
    /// [`Self::with_limits`] (call that first or after, either works).
    pub fn with_sales(mut self, strategy: Strategy, settings: EngineSettings) -> Self {
        self.shared_mut().sales = Sales::new(self.db.clone(), strategy, settings)
            .with_deadline(purchase_deadline(&self.limits));
        self
    }

    /// Redis, for the sale strategies that use it.
    pub fn with_redis(mut self, url: &str) -> Result<Self, AppError> {
        self.shared_mut().sales = self.sales.clone().with_redis(url)?;
        Ok(self)
    }

    /// The Redis gate in front of the sale path (see `sale::Gate`).
    pub fn with_gate(
        mut self,
        redis: crate::sale::GateRedis,
        settings: crate::sale::GateSettings,
    ) -> Result<Self, AppError> {
        self.shared_mut().sales = self.sales.clone().with_gate(redis, settings)?;
        Ok(self)
    }

    /// The key of held orders' confirmation links (call after
    /// [`Self::with_sales`]).
    pub fn with_confirm_key(mut self, key: crate::domain::ConfirmKey) -> Self {
        self.shared_mut().sales = self.sales.clone().with_confirm_key(key);
        self
    }

    /// The waiting rooms' key and cap (call after [`Self::with_sales`]).
    pub fn with_rooms(mut self, rooms: crate::waiting_room::Rooms) -> Self {
        self.shared_mut().sales = self.sales.clone().with_rooms(rooms);
        self
    }

    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.shared_mut().limits = limits;
        self.shared_mut().purchase_limits = PurchaseLimits::new(limits.purchase_rates);
        self.shared_mut().api_rate = ApiRateLimit::new(limits.api_requests_per_minute);
        self.shared_mut().code_guard = CodeGuard::new(limits.code_failures_per_ip);
        self.shared_mut().sales = self.sales.clone().with_deadline(purchase_deadline(&limits));
        self
    }

    /// Accept webhook URLs at loopback and private addresses (tests).
    pub fn with_webhooks_allow_private(mut self, allow: bool) -> Self {
        self.shared_mut().webhooks_allow_private = allow;
        self
    }

    pub fn with_secure_cookies(mut self, secure: bool) -> Self {
        self.shared_mut().secure_cookies = secure;
        self
    }
}

/// Middleware and handlers that need only the pool take `State<PgPool>`.
impl FromRef<AppState> for PgPool {
    fn from_ref(state: &AppState) -> Self {
        state.db.clone()
    }
}

/// The session store: the `sessions` table from migrations/. Behind a pooler
/// in transaction mode it writes through connections of its own, straight
/// to Postgres: the store writes with one-off statements, which there
/// would commit only when their connection went back to the pool.
#[expect(
    clippy::expect_used,
    reason = "the names are constants that the store accepts; a test starts it"
)]
pub fn session_store(db: PgPool) -> PostgresStore {
    PostgresStore::new(crate::db::session::pool_for_sessions(&db))
        .with_schema_name("public")
        .and_then(|store| store.with_table_name("sessions"))
        .expect("constant, valid identifiers")
}
