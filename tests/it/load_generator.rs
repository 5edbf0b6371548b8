//! The load generator (src/bin/stampede-load) end to end: seed 000 played
//! against a `stampede serve` process, through the JSON API and through the
//! HTML form, and its report held against the tables.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::{
    net::TcpListener,
    process::{Child, Command, Stdio},
};

use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use uuid::Uuid;

/// The server process, killed when the test ends, however it ends.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `stampede-load run seed000 …` against `base`; its stdout.
async fn seed000(base: &str, database_url: &str, extra: &[&str]) -> String {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_stampede-load"))
        .args([
            "run",
            "seed000",
            "--url",
            base,
            "--database-url",
            database_url,
        ])
        .args(["--wait-ready", "60", "--quiet"])
        .args(extra)
        .output()
        .await
        .expect("run stampede-load");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "stampede-load failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// What the text table says on the line named `name`.
fn table_value<'a>(table: &'a str, name: &str) -> &'a str {
    table
        .lines()
        .find_map(|l| l.trim_start().strip_prefix(name))
        .unwrap_or_else(|| panic!("no `{name}` line in:\n{table}"))
        .trim()
}

/// The number on the text table's line named `name`.
fn table_number(table: &str, name: &str) -> i64 {
    let value = table_value(table, name);
    value
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number on `{name}`: {value}"))
}

#[sqlx::test]
async fn seed000_through_the_load_generator_sells_ten_tickets_and_accounts_for_every_order(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = common::pool(connect.clone(), 2).await;
    let database_url = common::database_url(&connect);
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}");
    let _server = Reaped(
        Command::new(env!("CARGO_BIN_EXE_stampede"))
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--database-url", &database_url])
            // All 200 buyers share one loopback address: the per-address
            // caps (tested in hold_the_door.rs) would refuse most of them.
            .args([
                "--purchase-burst-per-ip",
                "0",
                "--max-in-flight-per-ip",
                "0",
                "--max-connections-per-ip",
                "0",
            ])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .expect("start stampede serve"),
    );

    // Through the JSON API, reported as JSON.
    let report: Value = serde_json::from_str(&seed000(&base, &database_url, &["--json"]).await)
        .expect("--json prints one JSON report");
    let inv = &report["invariants"];
    assert_eq!(inv["ok"], true, "{inv}");
    assert_eq!(inv["oversold"], false);
    assert_eq!(inv["unanswered"], 0, "committed orders nobody was told of");
    assert_eq!(inv["answered_not_committed"], 0, "successes with no order");
    assert_eq!(report["attempts"], 200);
    assert_eq!(report["errors_total"], 0, "{}", report["errors"]);
    let ids: Vec<Uuid> = serde_json::from_value(report["ticket_type_ids"].clone()).unwrap();
    let (orders, tickets): (i64, i64) = sqlx::query_as(
        "SELECT count(*), COALESCE(SUM(quantity), 0)::int8 FROM orders
         WHERE ticket_type_id = ANY($1) AND status = 'confirmed'",
    )
    .bind(&ids)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(tickets, 10, "200 buyers of 1-4 tickets sell all ten");
    assert_eq!(report["committed_tickets"], tickets);
    assert_eq!(
        report["committed_orders"], orders,
        "committed, from the tables"
    );
    assert_eq!(report["sold_answers"], orders, "one success per order");
    assert_eq!(report["refused_total"], 200 - orders, "the others refused");

    // Through the form, as a browser, reported as a table.
    let table = seed000(&base, &database_url, &["--via", "form"]).await;
    assert!(
        table_value(&table, "invariants").starts_with("OK:"),
        "{table}"
    );
    let all_orders: i64 =
        sqlx::query_scalar("SELECT count(*) FROM orders WHERE status = 'confirmed'")
            .fetch_one(&pool)
            .await
            .unwrap();
    let form_orders = table_number(&table, "committed orders (Postgres)");
    assert_eq!(form_orders, all_orders - orders, "{table}");
    assert_eq!(table_number(&table, "answered as sold"), form_orders);
    assert_eq!(table_number(&table, "tickets sold (Postgres)"), 10);
    assert_eq!(table_number(&table, "errors"), 0, "{table}");
    common::assert_invariants(&pool).await;
    pool.close().await;
}
