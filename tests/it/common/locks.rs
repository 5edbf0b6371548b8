//! Holding a purchase between its pre-check and its stock `UPDATE`: a test
//! transaction takes the ticket type's row lock, the purchase queues behind
//! it, and [`wait_until_blocked`] proves from Postgres (not from timing)
//! that it is queued before the test changes anything.

use std::time::Duration;

use sqlx::{PgPool, Postgres, Transaction};
use uuid::Uuid;

/// A transaction holding one ticket type's row lock, and its backend's pid.
pub struct RowHold {
    pub tx: Transaction<'static, Postgres>,
    pub pid: i32,
}

/// Lock the ticket type row the way the stock `UPDATE` will need it.
/// `FOR NO KEY UPDATE` conflicts with that `UPDATE` but not with the
/// foreign-key checks (`FOR KEY SHARE`) of the order, ticket and holdings
/// inserts before it, so a purchase passes those and stops at its `UPDATE`.
pub async fn hold_ticket_type(pool: &PgPool, ticket_type_id: Uuid) -> RowHold {
    let mut tx = pool.begin().await.unwrap();
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    sqlx::query("SELECT 1 FROM ticket_types WHERE id = $1 FOR NO KEY UPDATE")
        .bind(ticket_type_id)
        .execute(&mut *tx)
        .await
        .unwrap();
    RowHold { tx, pid }
}

/// A transaction holding a whole table (`ACCESS EXCLUSIVE`): any statement
/// that reads or writes it waits, so an answer that comes while it is held
/// read nothing of it (and a reader shows in [`blocked`]).
pub async fn lock_table(pool: &PgPool, table: &str) -> Transaction<'static, Postgres> {
    let mut tx = pool.begin().await.unwrap();
    sqlx::query(&format!("LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"))
        .execute(&mut *tx)
        .await
        .unwrap();
    tx
}

/// The backends of this test's database (`sqlx::test` makes one per test)
/// waiting for a lock while running a statement that starts with
/// `statement` (e.g. "UPDATE ticket_types"). Behind a held row, the first
/// waiter waits on the holder and the rest on the first (Postgres queues
/// them on the tuple lock), so this counts waiters, not a holder's victims.
pub async fn blocked(pool: &PgPool, statement: &str) -> Vec<i32> {
    sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity
         WHERE datname = current_database() AND wait_event_type = 'Lock'
           AND ltrim(query) LIKE $1 || '%'
         ORDER BY pid",
    )
    .bind(statement)
    .fetch_all(pool)
    .await
    .unwrap()
}

/// Wait until at least `count` backends wait for a lock running
/// `statement`. Polls Postgres; panics after a minute (a hang, not a
/// timing assertion: the test cannot go on without the queue).
pub async fn wait_until_blocked(pool: &PgPool, statement: &str, count: usize) {
    for _ in 0..6000 {
        if blocked(pool, statement).await.len() >= count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("fewer than {count} `{statement}` ever waited for a lock");
}
