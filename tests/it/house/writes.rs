//! Every write of the app is in an explicit transaction: behind a pooler in
//! transaction mode a one-off statement on the pool commits only when its
//! connection goes back to the pool, after its caller has gone on
//! (`pooled_in_transactions` in src/config/database.rs). So no
//! `sqlx::query…!` that inserts, updates or deletes may run on a pool.

use std::path::Path;

use super::{read, rust_files, shown};

/// The calls that run a statement, and what they run it on.
const RUNS: [&str; 5] = [
    ".execute(",
    ".fetch_one(",
    ".fetch_optional(",
    ".fetch_all(",
    ".fetch(",
];

/// One-off writes in `source` (a file's text): (line, the executor named).
fn one_off_writes(source: &str, root: &Path) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = source[from..].find("sqlx::query") {
        let start = from + at;
        from = start + "sqlx::query".len();
        let Some((run_at, run)) = RUNS
            .iter()
            .filter_map(|run| source[from..].find(run).map(|i| (from + i, *run)))
            .min()
        else {
            break;
        };
        let call = &source[start..run_at];
        let sql = match call.find("\"sql/") {
            Some(i) => {
                let path = &call[i + 1..];
                let path = &path[..path.find('"').unwrap_or(path.len())];
                std::fs::read_to_string(root.join(path)).unwrap_or_default()
            }
            None => call.to_owned(),
        };
        let sql = sql.replace("FOR UPDATE", "");
        let writes = ["INSERT", "UPDATE", "DELETE"].iter().any(|word| {
            sql.match_indices(word).any(|(i, _)| {
                let before = sql[..i].chars().next_back();
                let after = sql[i + word.len()..].chars().next();
                !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                    && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
        });
        let args_start = run_at + run.len();
        let executor = source[args_start..]
            .split(')')
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned();
        let in_transaction = executor.starts_with("&mut")
            || ["tx", "conn", "executor"]
                .iter()
                .any(|name| executor.contains(name));
        if writes && !in_transaction {
            found.push((source[..start].matches('\n').count() + 1, executor));
        }
    }
    found
}

#[test]
fn every_write_of_the_app_is_in_an_explicit_transaction() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut offenders = Vec::new();
    for file in rust_files(&root.join("src")) {
        // The load generator is not the app: it sets up its own fixtures.
        if file.starts_with(root.join("src/bin")) {
            continue;
        }
        for (line, executor) in one_off_writes(&read(&file), root) {
            offenders.push(format!("  {}:{line} on `{executor}`", shown(&file)));
        }
    }
    assert!(
        offenders.is_empty(),
        "writes on a pool, outside a transaction (commit them in one of their own):\n{}",
        offenders.join("\n")
    );
}

#[test]
fn the_scan_finds_a_one_off_write_and_passes_a_transaction() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let source = r#"
        sqlx::query!("UPDATE events SET title = $1", title).execute(db).await?;
        sqlx::query!("SELECT 1 FROM events FOR UPDATE").fetch_one(db).await?;
        sqlx::query!("DELETE FROM events").execute(&mut *tx).await?;
    "#;
    assert_eq!(one_off_writes(source, root), vec![(2, "db".to_owned())]);
}
