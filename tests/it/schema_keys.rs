//! The sale tables' foreign keys, checked per statement by triggers
//! (migrations/0028_foreign_keys_per_statement.sql) instead of per row:
//! rows written by hand are held to the same rules the dropped constraints
//! kept. The interleavings with a concurrent DELETE of the parent are in
//! tests/isolation/specs/foreign_keys.spec; every test's
//! `assert_invariants` also counts orphans.

use crate::common;

use common::{TicketSpec, assert_invariants, pool, published_event};
use sqlx::{PgExecutor, PgPool, postgres::PgConnectOptions};
use uuid::Uuid;

/// Runs `sql` (binding `binds` as uuids) and returns the constraint named
/// by its error, which must be a foreign-key violation (SQLSTATE 23503).
async fn refused(pool: &PgPool, sql: &str, binds: &[Uuid]) -> Option<String> {
    let mut query = sqlx::query(sql);
    for bind in binds {
        query = query.bind(bind);
    }
    let error = query
        .execute(pool)
        .await
        .expect_err(&format!("must be refused: {sql}"));
    let db = error.as_database_error().expect("a database error");
    assert_eq!(db.code().as_deref(), Some("23503"), "{sql}: {db}");
    db.constraint().map(str::to_owned)
}

async fn order(pool: &PgPool, ticket_type_id: Uuid, key: &str) -> Uuid {
    let id = Uuid::new_v4();
    let mut tx = pool.begin().await.unwrap();
    sqlx::query(
        "INSERT INTO orders (id, ticket_type_id, email, quantity, unit_price_minor, currency,
                             idempotency_key, buyer_key)
         VALUES ($1, $2, 'hand@example.org', 1, 2500, 'EUR', $3, 'hand@example.org')",
    )
    .bind(id)
    .bind(ticket_type_id)
    .bind(key)
    .execute(&mut *tx)
    .await
    .unwrap();
    sqlx::query("INSERT INTO tickets (order_id, position) VALUES ($1, 1)")
        .bind(id)
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query("UPDATE ticket_types SET remaining = remaining - 1 WHERE id = $1")
        .bind(ticket_type_id)
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO buyer_holdings (ticket_type_id, buyer_key, quantity)
         VALUES ($1, 'hand@example.org', 1)
         ON CONFLICT (ticket_type_id, buyer_key) DO UPDATE
             SET quantity = buyer_holdings.quantity + 1",
    )
    .bind(ticket_type_id)
    .execute(&mut *tx)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO event_buyer_holdings (event_id, buyer_key, quantity)
         SELECT event_id, 'hand@example.org', 1 FROM ticket_types WHERE id = $1
         ON CONFLICT (event_id, buyer_key) DO UPDATE
             SET quantity = event_buyer_holdings.quantity + 1",
    )
    .bind(ticket_type_id)
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    id
}

async fn count<'e>(executor: impl PgExecutor<'e>, sql: &str, id: Uuid) -> i64 {
    sqlx::query_scalar(sql)
        .bind(id)
        .fetch_one(executor)
        .await
        .unwrap()
}

#[sqlx::test]
async fn a_row_naming_no_parent_is_refused_and_nothing_of_its_statement_is_written(
    _: sqlx::postgres::PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 4).await;
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let real = fixture.ticket_type_id();
    let real_order = order(&pool, real, "hand-key-1").await;
    let missing = Uuid::new_v4();

    // One good row and one orphan in the same statement: the statement fails whole.
    let constraint = refused(
        &pool,
        "INSERT INTO orders (ticket_type_id, email, quantity, unit_price_minor, currency,
                             idempotency_key)
         VALUES ($1, 'a@example.org', 1, 0, 'EUR', 'k-good'),
                ($2, 'a@example.org', 1, 0, 'EUR', 'k-orphan')",
        &[real, missing],
    )
    .await;
    assert_eq!(constraint.as_deref(), Some("orders_ticket_type_id_fkey"));
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM orders WHERE ticket_type_id = $1",
            real
        )
        .await,
        1,
        "the statement's good row was written"
    );

    let constraint = refused(
        &pool,
        "INSERT INTO tickets (order_id, position) VALUES ($1, 2), ($2, 1)",
        &[real_order, missing],
    )
    .await;
    assert_eq!(constraint.as_deref(), Some("tickets_order_id_fkey"));

    let constraint = refused(
        &pool,
        "INSERT INTO buyer_holdings (ticket_type_id, buyer_key, quantity) VALUES ($1, 'x', 1)",
        &[missing],
    )
    .await;
    assert_eq!(
        constraint.as_deref(),
        Some("buyer_holdings_ticket_type_id_fkey")
    );

    let constraint = refused(
        &pool,
        "INSERT INTO event_buyer_holdings (event_id, buyer_key, quantity) VALUES ($1, 'x', 1)",
        &[missing],
    )
    .await;
    assert_eq!(
        constraint.as_deref(),
        Some("event_buyer_holdings_event_id_fkey")
    );

    // A key moved to a parent that does not exist, or at all: refused.
    for (sql, id) in [
        (
            "UPDATE orders SET ticket_type_id = gen_random_uuid() WHERE id = $1",
            real_order,
        ),
        (
            "UPDATE tickets SET order_id = gen_random_uuid() WHERE order_id = $1",
            real_order,
        ),
        (
            "UPDATE buyer_holdings SET ticket_type_id = gen_random_uuid() WHERE ticket_type_id = $1",
            real,
        ),
        (
            "UPDATE event_buyer_holdings SET event_id = gen_random_uuid() WHERE event_id = $1",
            fixture.event_id,
        ),
        (
            "UPDATE orders SET id = gen_random_uuid() WHERE id = $1",
            real_order,
        ),
        (
            "UPDATE ticket_types SET id = gen_random_uuid() WHERE id = $1",
            real,
        ),
        (
            "UPDATE events SET id = gen_random_uuid() WHERE id = $1",
            fixture.event_id,
        ),
    ] {
        refused(&pool, sql, &[id]).await;
    }
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn a_parents_delete_refuses_or_takes_its_children_with_it(
    _: sqlx::postgres::PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 4).await;
    let fixture = published_event(
        &pool,
        &[TicketSpec::new(10, 4, 4), TicketSpec::new(10, 4, 4)],
    )
    .await;
    let (sold, unsold) = (fixture.ticket_type_ids[0], fixture.ticket_type_ids[1]);
    let first = order(&pool, sold, "hand-key-1").await;
    order(&pool, sold, "hand-key-2").await;

    // A ticket type with orders cannot go, nor its event.
    let constraint = refused(&pool, "DELETE FROM ticket_types WHERE id = $1", &[sold]).await;
    assert_eq!(constraint.as_deref(), Some("orders_ticket_type_id_fkey"));
    refused(
        &pool,
        "DELETE FROM events WHERE id = $1",
        &[fixture.event_id],
    )
    .await;

    // A ticket type's holdings go with it.
    sqlx::query(
        "INSERT INTO buyer_holdings (ticket_type_id, buyer_key, quantity) VALUES ($1, 'x', 0)",
    )
    .bind(unsold)
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("DELETE FROM ticket_types WHERE id = $1")
        .bind(unsold)
        .execute(&pool)
        .await
        .unwrap();
    let sql = "SELECT count(*) FROM buyer_holdings WHERE ticket_type_id = $1";
    assert_eq!(count(&pool, sql, unsold).await, 0);

    // An order's tickets go with it (not the other order's).
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("DELETE FROM orders WHERE id = $1")
        .bind(first)
        .execute(&mut *tx)
        .await
        .unwrap();
    let sql = "SELECT count(*) FROM tickets WHERE order_id = $1";
    assert_eq!(count(&mut *tx, sql, first).await, 0);
    let sql = "SELECT count(*) FROM tickets k JOIN orders o ON o.id = k.order_id
               WHERE o.ticket_type_id = $1";
    assert_eq!(count(&mut *tx, sql, sold).await, 1);
    // Rolled back: the orders stay, and with them the stock's arithmetic.
    tx.rollback().await.unwrap();

    // Once its orders are gone, the event goes, and its holdings with it.
    let mut tx = pool.begin().await.unwrap();
    for sql in [
        "DELETE FROM orders WHERE ticket_type_id IN (SELECT id FROM ticket_types WHERE event_id = $1)",
        "DELETE FROM events WHERE id = $1",
    ] {
        sqlx::query(sql)
            .bind(fixture.event_id)
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();
    for sql in [
        "SELECT count(*) FROM event_buyer_holdings WHERE event_id = $1",
        "SELECT count(*) FROM buyer_holdings h WHERE NOT EXISTS
             (SELECT 1 FROM ticket_types t WHERE t.id = h.ticket_type_id) AND $1 IS NOT NULL",
        "SELECT count(*) FROM tickets k WHERE NOT EXISTS
             (SELECT 1 FROM orders o WHERE o.id = k.order_id) AND $1 IS NOT NULL",
    ] {
        assert_eq!(count(&pool, sql, fixture.event_id).await, 0, "{sql}");
    }
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn a_parents_delete_under_repeatable_read_is_refused(
    _: sqlx::postgres::PgPoolOptions,
    connect: PgConnectOptions,
) {
    // Its triggers would read the transaction's older snapshot and could
    // miss a child committed meanwhile: refused rather than risk an orphan.
    let pool = pool(connect, 4).await;
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut *tx)
        .await
        .unwrap();
    let error = sqlx::query("DELETE FROM ticket_types WHERE id = $1")
        .bind(fixture.ticket_type_id())
        .execute(&mut *tx)
        .await
        .expect_err("a delete under REPEATABLE READ is refused");
    let db = error.as_database_error().expect("a database error");
    assert_eq!(db.code().as_deref(), Some("0A000"), "{db}");
    tx.rollback().await.unwrap();
    let sql = "SELECT count(*) FROM ticket_types WHERE id = $1";
    assert_eq!(count(&pool, sql, fixture.ticket_type_id()).await, 1);
}

/// A check costs what its statement writes, not what the parent table
/// holds. PL/pgSQL keeps a query's plan for the session, planned with the
/// first statement's transition table: a connection whose first batch of
/// tickets was large kept a scan of all of `orders` for every later batch
/// (migrations/0029_foreign_key_checks_by_index.sql). Read from the
/// connection's own counters, so no timing is involved.
#[sqlx::test]
async fn a_small_batch_after_a_large_one_checks_its_parents_by_index(
    _: sqlx::postgres::PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 2).await;
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    sqlx::query(
        "INSERT INTO orders (ticket_type_id, email, quantity, unit_price_minor, currency,
                             idempotency_key)
         SELECT $1, 'bulk@example.org', 1, 0, 'EUR', 'bulk-' || i
         FROM generate_series(1, 5000) i",
    )
    .bind(fixture.ticket_type_id())
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("ANALYZE orders").execute(&pool).await.unwrap();
    let last: Uuid =
        sqlx::query_scalar("SELECT id FROM orders WHERE idempotency_key = 'bulk-5000'")
            .fetch_one(&pool)
            .await
            .unwrap();

    let mut conn = pool.acquire().await.unwrap();
    // The session's first batch of tickets: 2,000 of them.
    sqlx::query(
        "INSERT INTO tickets (order_id, position)
         SELECT id, 1 FROM orders WHERE idempotency_key <> 'bulk-5000' LIMIT 2000",
    )
    .execute(&mut *conn)
    .await
    .unwrap();
    // Then one ticket, its scans of orders counted around it: the
    // connection's own counters, which include its earlier transactions'
    // until they are flushed, and never change inside a transaction
    // except by its own work.
    let scans = "SELECT seq_scan, coalesce(idx_scan, 0) FROM pg_stat_xact_user_tables
                 WHERE relname = 'orders'";
    let mut tx = sqlx::Connection::begin(&mut *conn).await.unwrap();
    let before: (i64, i64) = sqlx::query_as(scans).fetch_one(&mut *tx).await.unwrap();
    sqlx::query("INSERT INTO tickets (order_id, position) VALUES ($1, 1)")
        .bind(last)
        .execute(&mut *tx)
        .await
        .unwrap();
    let after: (i64, i64) = sqlx::query_as(scans).fetch_one(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    let (seq_scans, index_scans) = (after.0 - before.0, after.1 - before.1);
    assert_eq!(seq_scans, 0, "the one ticket's check read all of orders");
    assert!(
        index_scans >= 1,
        "the check looked its order up: {index_scans}"
    );
}
