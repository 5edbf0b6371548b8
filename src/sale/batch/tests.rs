use sqlx::postgres::PgPoolOptions;

use super::{rows::Held, *};
use crate::domain::{Email, EventId, IdempotencyKey, Quantity};

/// An idle worker closes its queue, sells what slipped in before the
/// close, and stops; the next purchase starts a new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_sells_what_slipped_in_then_stops() {
    // Nothing listens on port 1: every read fails at once, which the
    // worker answers with 503. Only whether it answers matters here.
    let db = PgPoolOptions::new()
        .acquire_timeout(Duration::from_secs(2))
        .connect_lazy("postgres://127.0.0.1:1/none")
        .unwrap();
    let settings = EngineSettings {
        idle_worker: Duration::from_millis(100),
        ..EngineSettings::default()
    };
    let sold_out = Arc::new(SoldOut::new(settings.sold_out_lifetime, None));
    let batcher = Arc::new(Batcher::new(db, settings, sold_out, ConfirmKey::random()));
    let ticket_type_id = TicketTypeId::from(uuid::Uuid::new_v4());
    let request = PurchaseRequest {
        event_id: None,
        ticket_type_id,
        quantity: Quantity::new(1).unwrap(),
        email: Email::parse("ada@example.org").unwrap(),
        idempotency_key: IdempotencyKey::generate(),
        pass: None,
        queue_entry: None,
        presale_code: None,
    };
    let job = |reply| Job {
        now: OffsetDateTime::now_utc(),
        request: request.clone(),
        replay_only: true,
        buyer: None,
        deadline: Instant::now() + Duration::from_secs(10),
        reply,
    };

    // A worker starts with the queue. Hold the queues' lock past its idle
    // time: it times out and waits for the lock to close the queue, and
    // a job sent meanwhile is in the queue when it closes.
    let queue = batcher.queue(ticket_type_id);
    assert_eq!(Arc::strong_count(&batcher), 2, "the worker holds one");
    let (reply, answer) = oneshot::channel();
    {
        let _queues = batcher.queues.lock().unwrap();
        std::thread::sleep(Duration::from_millis(500));
        queue.try_send(job(reply)).unwrap();
    }
    let answer = tokio::time::timeout(Duration::from_secs(10), answer)
        .await
        .expect("the job that slipped in is answered")
        .expect("the worker answers it, not drops it");
    assert!(matches!(answer, Err(AppError::Overloaded)), "{answer:?}");

    // Then it stops: its queue is gone and it no longer holds the batcher.
    let stopped = Instant::now() + Duration::from_secs(5);
    while Arc::strong_count(&batcher) > 1 {
        assert!(Instant::now() < stopped, "the idle worker did not stop");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(queue.is_closed());
    assert!(batcher.queues.lock().unwrap().is_empty());

    // A later purchase starts a new worker and is answered.
    let again = tokio::time::timeout(
        Duration::from_secs(10),
        batcher.replay_or_sold_out(OffsetDateTime::now_utc(), &request),
    )
    .await
    .expect("a later purchase is answered");
    assert!(matches!(again, Err(AppError::Overloaded)), "{again:?}");
}

/// A database error with a given SQLSTATE, as Postgres would report it.
#[derive(Debug)]
struct Sqlstate(&'static str);

impl std::fmt::Display for Sqlstate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SQLSTATE {}", self.0)
    }
}

impl std::error::Error for Sqlstate {}

impl sqlx::error::DatabaseError for Sqlstate {
    fn message(&self) -> &str {
        "test"
    }
    fn code(&self) -> Option<std::borrow::Cow<'_, str>> {
        Some(self.0.into())
    }
    fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self
    }
    fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
        self
    }
    fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
        self
    }
    fn kind(&self) -> sqlx::error::ErrorKind {
        sqlx::error::ErrorKind::Other
    }
}

fn database_error(code: &'static str) -> AppError {
    AppError::internal(sqlx::Error::Database(Box::new(Sqlstate(code))))
}

#[test]
fn only_the_lock_and_statement_timeouts_are_past_the_deadline() {
    assert!(past_deadline(&database_error("55P03")));
    assert!(past_deadline(&database_error("57014")));
    assert!(!past_deadline(&database_error("23505")));
    assert!(!past_deadline(&AppError::internal(anyhow::anyhow!(
        "55P03"
    ))));
    assert!(!past_deadline(&AppError::Overloaded));
}

/// `roomy` of tests/isolation/fixtures.sql: 10 seats, on sale now.
const ROOMY: uuid::Uuid = uuid::uuid!("00000000-0000-0000-0000-0000000000a2");

/// Two jobs for `roomy`, one seat each, with the given deadlines.
fn two_jobs(
    deadlines: [Duration; 2],
) -> (Vec<Job>, Vec<oneshot::Receiver<Result<Purchase, AppError>>>) {
    let started = Instant::now();
    deadlines
        .iter()
        .enumerate()
        .map(|(n, deadline)| {
            let (reply, answer) = oneshot::channel();
            let email = Email::parse(&format!("buyer{n}@example.org")).unwrap();
            let job = Job {
                now: OffsetDateTime::now_utc(),
                buyer: Some(BuyerKey::from(&email)),
                request: PurchaseRequest {
                    event_id: None,
                    ticket_type_id: TicketTypeId::from(ROOMY),
                    quantity: Quantity::new(1).unwrap(),
                    email,
                    idempotency_key: IdempotencyKey::generate(),
                    pass: None,
                    queue_entry: None,
                    presale_code: None,
                },
                replay_only: false,
                deadline: started + *deadline,
                reply,
            };
            (job, answer)
        })
        .unzip()
}

/// Sell `jobs` as one batch on a fresh engine; the answers, in order.
async fn sell_as_one_batch(
    db: &PgPool,
    (jobs, answers): (Vec<Job>, Vec<oneshot::Receiver<Result<Purchase, AppError>>>),
) -> Vec<Result<Purchase, AppError>> {
    let sold_out = Arc::new(SoldOut::new(Duration::from_secs(1), None));
    let batcher = Batcher::new(
        db.clone(),
        EngineSettings::default(),
        sold_out,
        ConfirmKey::random(),
    );
    batcher.sell(TicketTypeId::from(ROOMY), jobs).await;
    let mut results = Vec::new();
    for answer in answers {
        results.push(answer.await.unwrap());
    }
    results
}

async fn roomy_orders_and_remaining(db: &PgPool) -> (i64, i32) {
    sqlx::query_as(
        "SELECT (SELECT count(*) FROM orders WHERE ticket_type_id = $1), \
                (SELECT remaining FROM ticket_types WHERE id = $1)",
    )
    .bind(ROOMY)
    .fetch_one(db)
    .await
    .unwrap()
}

/// A batch that fails for a reason of its own (not the deadline) is not
/// the buyers' fault: each of its requests is sold on its own.
#[sqlx::test(
    migrations = "./migrations",
    fixtures(path = "../../../tests/isolation", scripts("fixtures"))
)]
async fn a_failed_batch_sells_its_requests_one_by_one(db: PgPool) {
    // Fault injection: any statement that writes more than one order fails.
    sqlx::raw_sql(
        "CREATE FUNCTION one_order_per_statement() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             IF (SELECT count(*) FROM written) > 1 THEN
                 RAISE EXCEPTION 'injected: one order per statement';
             END IF;
             RETURN NULL;
         END $$;
         CREATE TRIGGER one_order_per_statement AFTER INSERT ON orders
             REFERENCING NEW TABLE AS written
             FOR EACH STATEMENT EXECUTE FUNCTION one_order_per_statement();",
    )
    .execute(&db)
    .await
    .unwrap();
    for answer in sell_as_one_batch(&db, two_jobs([Duration::from_secs(20); 2])).await {
        assert!(
            matches!(answer, Ok(Purchase::Created { .. })),
            "sold alone: {answer:?}"
        );
    }
    assert_eq!(roomy_orders_and_remaining(&db).await, (2, 8));
}

/// The batch statement writes its orders even when one of its guards (the
/// stock, the buyer's holdings per type or per event) refuses its row; the
/// engine must then roll back. Each guard is made to refuse by a trigger
/// that drops its row: nothing is sold, nothing is written.
#[sqlx::test(
    migrations = "./migrations",
    fixtures(path = "../../../tests/isolation", scripts("fixtures"))
)]
async fn a_guard_that_refuses_its_row_rolls_the_whole_batch_back(db: PgPool) {
    sqlx::raw_sql(
        "CREATE FUNCTION drop_the_row() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN RETURN NULL; END $$;",
    )
    .execute(&db)
    .await
    .unwrap();
    for (table, on) in [
        ("ticket_types", "UPDATE"),
        ("buyer_holdings", "INSERT OR UPDATE"),
        ("event_buyer_holdings", "INSERT OR UPDATE"),
    ] {
        sqlx::raw_sql(&format!(
            "CREATE TRIGGER refuse BEFORE {on} ON {table}
                 FOR EACH ROW EXECUTE FUNCTION drop_the_row();"
        ))
        .execute(&db)
        .await
        .unwrap();
        for answer in sell_as_one_batch(&db, two_jobs([Duration::from_secs(20); 2])).await {
            assert!(
                !matches!(answer, Ok(Purchase::Created { .. })),
                "sold with the {table} guard refusing: {answer:?}"
            );
        }
        assert_eq!(roomy_orders_and_remaining(&db).await, (0, 10), "{table}");
        sqlx::raw_sql(&format!("DROP TRIGGER refuse ON {table};"))
            .execute(&db)
            .await
            .unwrap();
    }
}

/// Two buyers who happen to send the same idempotency key (a key is the
/// buyer's own, not global) are two purchases, sold in the one batch: the
/// written rows are matched back to their requests by buyer *and* key.
#[sqlx::test(
    migrations = "./migrations",
    fixtures(path = "../../../tests/isolation", scripts("fixtures"))
)]
async fn two_buyers_with_one_key_are_sold_in_one_batch(db: PgPool) {
    let (mut jobs, answers) = two_jobs([Duration::from_secs(20); 2]);
    jobs[1].request.idempotency_key = jobs[0].request.idempotency_key.clone();
    for answer in sell_as_one_batch(&db, (jobs, answers)).await {
        assert!(matches!(answer, Ok(Purchase::Created { .. })), "{answer:?}");
    }
    assert_eq!(roomy_orders_and_remaining(&db).await, (2, 8));
    let transactions: i64 = sqlx::query_scalar(
        "SELECT count(DISTINCT xmin::text) FROM orders WHERE ticket_type_id = $1",
    )
    .bind(ROOMY)
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!(transactions, 1, "the batch failed and sold them one by one");
}

/// Another transaction holding `roomy`'s row (as a cancellation would),
/// until rolled back.
async fn hold_roomy_row(db: &PgPool) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut holder = db.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM ticket_types WHERE id = $1 FOR UPDATE")
        .bind(ROOMY)
        .execute(&mut *holder)
        .await
        .unwrap();
    holder
}

/// A batch that waited on the row lock past its earliest deadline tells
/// every buyer in it to come back, writes nothing, and does not queue
/// them again one by one behind the same lock.
#[sqlx::test(
    migrations = "./migrations",
    fixtures(path = "../../../tests/isolation", scripts("fixtures"))
)]
async fn a_batch_past_its_deadline_refuses_all_its_requests(db: PgPool) {
    let holder = hold_roomy_row(&db).await;
    let sold_out = Arc::new(SoldOut::new(Duration::from_secs(1), None));
    let batcher = Batcher::new(
        db.clone(),
        EngineSettings::default(),
        sold_out,
        ConfirmKey::random(),
    );
    // The first buyer's deadline passes while the lock is held; the
    // second one's would not.
    let (jobs, answers) = two_jobs([Duration::from_millis(300), Duration::from_secs(30)]);

    let selling = tokio::spawn(async move {
        batcher.sell(TicketTypeId::from(ROOMY), jobs).await;
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    holder.commit().await.unwrap();
    selling.await.unwrap();

    for answer in answers {
        let answer = answer.await.unwrap();
        assert!(matches!(answer, Err(AppError::Overloaded)), "{answer:?}");
    }
    assert_eq!(roomy_orders_and_remaining(&db).await, (0, 10));
}

/// A request that names its event is sold only if the ticket type is
/// that event's (the batch's own check, behind the pre-check's).
#[sqlx::test(
    migrations = "./migrations",
    fixtures(path = "../../../tests/isolation", scripts("fixtures"))
)]
async fn a_batch_sells_only_for_the_event_the_request_names(db: PgPool) {
    let sold_out = Arc::new(SoldOut::new(Duration::from_secs(1), None));
    let batcher = Batcher::new(
        db.clone(),
        EngineSettings::default(),
        sold_out,
        ConfirmKey::random(),
    );
    let (mut jobs, answers) = two_jobs([Duration::from_secs(20); 2]);
    let show = uuid::uuid!("00000000-0000-0000-0000-0000000000e1");
    jobs[0].request.event_id = Some(EventId::from(show));
    jobs[1].request.event_id = Some(EventId::from(uuid::Uuid::new_v4()));

    batcher.sell(TicketTypeId::from(ROOMY), jobs).await;

    let answers: Vec<_> = futures::future::join_all(answers).await;
    assert!(
        matches!(answers[0], Ok(Ok(Purchase::Created { .. }))),
        "{:?}",
        answers[0]
    );
    assert!(
        matches!(answers[1], Ok(Err(AppError::NotFound))),
        "{:?}",
        answers[1]
    );
    assert_eq!(roomy_orders_and_remaining(&db).await, (1, 9));
}

/// Within one batch each request is decided against what the ones
/// before it took: the stock and the buyer's counts (of the type and of
/// the event). The write would refuse a batch that took more, and the
/// requests would then be sold one by one: right, but slow.
#[test]
fn a_batch_decides_each_request_against_the_ones_before_it() {
    let (jobs, _answers) = two_jobs([Duration::from_secs(20); 2]);
    let mut jobs = jobs.into_iter();
    let (Some(first), Some(second)) = (jobs.next(), jobs.next()) else {
        unreachable!("two jobs")
    };
    let same_buyer = Job {
        request: PurchaseRequest {
            idempotency_key: IdempotencyKey::generate(),
            ..first.request.clone()
        },
        buyer: first.buyer.clone(),
        reply: oneshot::channel().0,
        ..first
    };
    let third = Job {
        request: PurchaseRequest {
            email: Email::parse("buyer2@example.org").unwrap(),
            idempotency_key: IdempotencyKey::generate(),
            ..second.request.clone()
        },
        buyer: Some(BuyerKey::from(&Email::parse("buyer2@example.org").unwrap())),
        reply: oneshot::channel().0,
        ..second
    };
    let jobs = [first, same_buyer, second, third];
    let buyers: Vec<BuyerKey> = jobs.iter().map(|j| j.buyer.clone().unwrap()).collect();
    let window = SaleWindow {
        status: EventStatus::Published,
        opens_at: OffsetDateTime::UNIX_EPOCH,
        closes_at: None,
        starts_at: OffsetDateTime::now_utc() + time::Duration::days(30),
    };
    let decide_with = |per_event: Option<i32>, remaining: i32| {
        let locked = Locked {
            event_id: uuid::Uuid::new_v4(),
            remaining,
            max_per_order: 2,
            max_per_buyer: 5,
            sales_halted: false,
            price_minor: 1000,
            currency: "EUR".into(),
            hidden: false,
        };
        let limits = BuyerLimits {
            per_ticket_type: 5,
            per_event,
        };
        let held = Held {
            of_type: HashMap::new(),
            in_event: HashMap::new(),
        };
        let existing = HashMap::new();
        let rules = Rules {
            locked: &locked,
            limits,
            window: &window,
            existing: &existing,
        };
        decide(&jobs, &buyers, &rules, held, HashMap::new())
            .into_iter()
            .map(|d| match d {
                Decision::Sell { .. } => "sell".to_owned(),
                Decision::Refuse(err) => err.code().to_owned(),
                Decision::Replay(_) => "replay".to_owned(),
                Decision::Twin => "twin".to_owned(),
            })
            .collect::<Vec<_>>()
    };
    // Two left: the first two sell, the rest find none.
    assert_eq!(
        decide_with(None, 2),
        ["sell", "sell", "sold_out", "sold_out"]
    );
    // One per buyer in the event: buyer0's second is refused, buyer1
    // and buyer2 buy.
    assert_eq!(
        decide_with(Some(1), 10),
        ["sell", "limit_exceeded", "sell", "sell"]
    );
}

#[test]
fn a_purchase_is_the_same_one_by_its_buyer_and_key() {
    let request = PurchaseRequest {
        event_id: None,
        ticket_type_id: TicketTypeId::from(uuid::Uuid::new_v4()),
        quantity: Quantity::new(1).unwrap(),
        email: Email::parse("Ada@Example.org").unwrap(),
        idempotency_key: IdempotencyKey::parse("key-0123456789abcdef").unwrap(),
        pass: None,
        queue_entry: None,
        presale_code: None,
    };
    assert_eq!(
        order_key(&request),
        (
            "ada@example.org".to_owned(),
            "key-0123456789abcdef".to_owned()
        )
    );
}

/// Purchases that come while a batch waits for the ticket type's row join
/// that batch: released, one transaction sells them all (without this, the
/// first purchase was sold alone and the others waited for its commit).
#[sqlx::test(
    migrations = "./migrations",
    fixtures(path = "../../../tests/isolation", scripts("fixtures"))
)]
async fn purchases_that_come_while_the_row_is_locked_join_the_batch(db: PgPool) {
    let batcher = default_batcher(&db);
    let holder = hold_roomy_row(&db).await;
    let buyer = roomy_buyer;
    let purchase = |n: usize| {
        let batcher = Arc::clone(&batcher);
        tokio::spawn(async move { batcher.purchase(OffsetDateTime::now_utc(), &buyer(n)).await })
    };
    // The first starts a batch, which waits for the row.
    let first = purchase(0);
    let waiting = Instant::now() + Duration::from_secs(10);
    loop {
        let (locked,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE wait_event_type = 'Lock' AND datname = current_database()",
        )
        .fetch_one(&db)
        .await
        .unwrap();
        if locked > 0 {
            break;
        }
        assert!(
            Instant::now() < waiting,
            "the batch never waited for the row"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let others: Vec<_> = (1..4).map(purchase).collect();
    // A replay-only job (its type taken for sold out) among them waits for
    // the next batch, and is answered there.
    let replay = {
        let batcher = Arc::clone(&batcher);
        tokio::spawn(async move {
            batcher
                .replay_or_sold_out(OffsetDateTime::now_utc(), &buyer(9))
                .await
        })
    };
    // Queued behind the waiting batch before the row is released.
    let queued = Instant::now() + Duration::from_secs(10);
    let queue = batcher.queue(TicketTypeId::from(ROOMY));
    while queue.max_capacity() - queue.capacity() < 4 {
        assert!(Instant::now() < queued, "the others were not queued");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    holder.rollback().await.unwrap();

    for sale in std::iter::once(first).chain(others) {
        let answer = sale.await.unwrap();
        assert!(matches!(answer, Ok(Purchase::Created { .. })), "{answer:?}");
    }
    let replayed = tokio::time::timeout(Duration::from_secs(10), replay)
        .await
        .expect("the replay-only job is answered")
        .unwrap();
    assert!(matches!(replayed, Err(AppError::SoldOut)), "{replayed:?}");
    let (orders, transactions) = roomy_orders_and_transactions(&db).await;
    assert_eq!(orders, 4);
    assert_eq!(transactions, 1, "sold in one transaction");
}

/// `roomy`'s orders, and the transactions that wrote them.
async fn roomy_orders_and_transactions(db: &PgPool) -> (i64, i64) {
    sqlx::query_as(
        "SELECT count(*), count(DISTINCT xmin::text) FROM orders WHERE ticket_type_id = $1",
    )
    .bind(ROOMY)
    .fetch_one(db)
    .await
    .unwrap()
}

/// An engine with the default settings on `db`.
fn default_batcher(db: &PgPool) -> Arc<Batcher> {
    let sold_out = Arc::new(SoldOut::new(Duration::from_secs(1), None));
    Arc::new(Batcher::new(
        db.clone(),
        EngineSettings::default(),
        sold_out,
        ConfirmKey::random(),
    ))
}

/// Buyer `n` of one `roomy` ticket, with a fresh key.
fn roomy_buyer(n: usize) -> PurchaseRequest {
    PurchaseRequest {
        event_id: None,
        ticket_type_id: TicketTypeId::from(ROOMY),
        quantity: Quantity::new(1).unwrap(),
        email: Email::parse(&format!("buyer{n}@example.org")).unwrap(),
        idempotency_key: IdempotencyKey::generate(),
        pass: None,
        queue_entry: None,
        presale_code: None,
    }
}

/// Until a transaction of the test's database sits idle holding `roomy`'s
/// row lock (a batch opened ahead, waiting for its purchases); panics
/// after 10 s.
async fn until_a_batch_waits_ahead(db: &PgPool) {
    let waiting = Instant::now() + Duration::from_secs(10);
    loop {
        let (idle,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE state = 'idle in transaction' AND datname = current_database()",
        )
        .fetch_one(db)
        .await
        .unwrap();
        if idle > 0 {
            return;
        }
        assert!(Instant::now() < waiting, "no batch opened ahead");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Behind the gate, the first purchase on its way has the worker open a
/// batch ahead (row locked, event read) while Redis answers; it waits for
/// every purchase on its way, queued or refused, and sells those that came
/// in one transaction. Without the wait, each purchase sold alone.
#[sqlx::test(
    migrations = "./migrations",
    fixtures(path = "../../../tests/isolation", scripts("fixtures"))
)]
async fn a_batch_opened_ahead_sells_the_purchases_on_their_way_together(db: PgPool) {
    let batcher = default_batcher(&db);
    let roomy = TicketTypeId::from(ROOMY);
    let wait = Duration::from_secs(30);
    let coming: Vec<OnTheWay> = (0..3).map(|_| batcher.on_its_way(roomy, wait)).collect();
    // One more that the gate will refuse: it leaves without a purchase.
    let refused = batcher.on_its_way(roomy, wait);
    until_a_batch_waits_ahead(&db).await;

    // They come one by one, far apart.
    let mut sales = Vec::new();
    for (n, on_its_way) in coming.into_iter().enumerate() {
        let batcher = Arc::clone(&batcher);
        sales.push(tokio::spawn(async move {
            batcher
                .purchase_on_its_way(OffsetDateTime::now_utc(), &roomy_buyer(n), on_its_way)
                .await
        }));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (orders, _) = roomy_orders_and_remaining(&db).await;
    assert_eq!(orders, 0, "the batch waits for the one still on its way");
    drop(refused);

    for sale in sales {
        let answer = tokio::time::timeout(Duration::from_secs(10), sale)
            .await
            .expect("sold once none is on its way")
            .unwrap();
        assert!(matches!(answer, Ok(Purchase::Created { .. })), "{answer:?}");
    }
    let (orders, transactions) = roomy_orders_and_transactions(&db).await;
    assert_eq!(orders, 3);
    assert_eq!(transactions, 1, "sold in one transaction");
}

/// A batch opened ahead for purchases the gate all refused writes nothing
/// and lets the row go at once; a purchase after it sells.
#[sqlx::test(
    migrations = "./migrations",
    fixtures(path = "../../../tests/isolation", scripts("fixtures"))
)]
async fn a_batch_opened_ahead_that_gets_none_lets_the_row_go(db: PgPool) {
    let batcher = default_batcher(&db);
    let roomy = TicketTypeId::from(ROOMY);
    let refused = batcher.on_its_way(roomy, Duration::from_secs(30));
    until_a_batch_waits_ahead(&db).await;
    let (before, remaining_before) = roomy_orders_and_remaining(&db).await;
    drop(refused);
    // The row is free long before the 30 s wait would end.
    let mut other = db.begin().await.unwrap();
    sqlx::query("SET LOCAL lock_timeout = '5s'")
        .execute(&mut *other)
        .await
        .unwrap();
    sqlx::query("SELECT 1 FROM ticket_types WHERE id = $1 FOR UPDATE")
        .bind(ROOMY)
        .execute(&mut *other)
        .await
        .expect("the batch opened ahead let the row go");
    other.rollback().await.unwrap();
    assert_eq!(
        roomy_orders_and_remaining(&db).await,
        (before, remaining_before)
    );

    let answer = batcher
        .purchase(OffsetDateTime::now_utc(), &roomy_buyer(0))
        .await;
    assert!(matches!(answer, Ok(Purchase::Created { .. })), "{answer:?}");
}
