//! A batch that fails: past its deadline, for a reason of its own, or
//! refused by a guard of its write.

use std::{sync::Arc, time::Duration};

use sqlx::PgPool;

use super::support::{
    ROOMY, hold_roomy_row, roomy_orders_and_remaining, sell_as_one_batch, two_jobs,
};
use crate::{
    domain::{ConfirmKey, TicketTypeId},
    error::AppError,
    sale::{
        batch::{settings::EngineSettings, transaction::past_deadline, worker::Batcher},
        outcome::Purchase,
        sold_out::SoldOut,
    },
};

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

/// A batch that fails for a reason of its own (not the deadline) is not
/// the buyers' fault: each of its requests is sold on its own.
#[sqlx::test(
    migrations = "./migrations",
    fixtures(path = "../../../../tests/isolation", scripts("fixtures"))
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
    fixtures(path = "../../../../tests/isolation", scripts("fixtures"))
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

/// A batch that waited on the row lock past its earliest deadline tells
/// every buyer in it to come back, writes nothing, and does not queue
/// them again one by one behind the same lock.
#[sqlx::test(
    migrations = "./migrations",
    fixtures(path = "../../../../tests/isolation", scripts("fixtures"))
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
