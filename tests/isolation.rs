//! SQL-level isolation specs, run by Postgres's own isolation tester
//! (`pg_isolation_regress`, Debian package `postgresql-server-dev-15`): one
//! spec per sale-path transaction, each permutation an interleaving of the
//! statements the app runs, each ending with the invariants read from the
//! tables. See docs/development.md, "Isolation specs".
//!
//! - `tests/isolation/specs/NAME.spec`: the specs. A session's
//!   `setup { @statements }` becomes `PREPARE` of every file under `sql/`
//!   (`sql/sale/take_stock.sql` is `sale_take_stock`), the very text that
//!   the Rust code includes with `sqlx::query_file!`; steps `EXECUTE` them.
//! - `tests/isolation/expected/NAME.out`: what the tester must print.
//! - `tests/isolation/setup.sql`: loaded once into a template database with
//!   every migration applied; each spec runs in a fresh copy of it.
//! - `tests/isolation/fixtures.sql` and `reset.sql`: the rows every
//!   permutation starts from, and the teardown that removes them; added to
//!   every spec (which therefore has no teardown of its own).
//!
//! - An `ERROR` in a permutation's output is part of the spec, never an
//!   accident in a regenerated file: the spec declares it on a comment line
//!   right above the permutation, `# expect-error: <message>` (one line per
//!   error, in order). The runner fails when the tester's output (and the
//!   expected file) holds an error that is not declared there, or lacks one
//!   that is, also when the expected outputs are being rewritten.
//!
//! `STAMPEDE_UPDATE_ISOLATION=1` rewrites the expected outputs from what the
//! specs print (read the diff before committing it);
//! `STAMPEDE_ISOLATION_SPECS=a,b` runs only those specs;
//! `STAMPEDE_PG_ISOLATION_REGRESS` names the driver if it is elsewhere.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    sync::atomic::{AtomicUsize, Ordering},
};

use sqlx::{
    Connection, Executor, PgConnection,
    postgres::{PgConnectOptions, PgPoolOptions},
};

const DEFAULT_DRIVER: &str =
    "/usr/lib/postgresql/15/lib/pgxs/src/test/isolation/pg_isolation_regress";

/// Database names start with this; the process id follows, so a run can
/// tell its own databases from those of a run that died.
const PREFIX: &str = "stampede_iso_";

static COUNTER: AtomicUsize = AtomicUsize::new(0);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn driver() -> PathBuf {
    let path = std::env::var_os("STAMPEDE_PG_ISOLATION_REGRESS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_DRIVER));
    assert!(
        path.is_file(),
        "{} is missing: install Debian's postgresql-server-dev-15 \
         (`sudo apt-get install -y postgresql-server-dev-15`; ./scripts/test does it when it can), \
         or point STAMPEDE_PG_ISOLATION_REGRESS at pg_isolation_regress",
        path.display()
    );
    path
}

fn server() -> PgConnectOptions {
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://127.0.0.1:5432/postgres".to_owned());
    url.parse().expect("DATABASE_URL is a Postgres URL")
}

fn unique_name(what: &str) -> String {
    format!(
        "{PREFIX}{}_{}_{what}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// `PREPARE` for every statement under `sql/`, named by its path.
fn prepared_statements() -> String {
    let mut files = Vec::new();
    for dir in fs::read_dir(root().join("sql")).unwrap() {
        let dir = dir.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        for file in fs::read_dir(&dir).unwrap() {
            let file = file.unwrap().path();
            if file.extension().is_some_and(|e| e == "sql") {
                files.push(file);
            }
        }
    }
    files.sort();
    // Session setups run again for every permutation, on the same connection.
    let mut out = String::from("DEALLOCATE ALL;\n");
    for file in files {
        let name = format!(
            "{}_{}",
            file.parent()
                .unwrap()
                .file_name()
                .unwrap()
                .to_str()
                .unwrap(),
            file.file_stem().unwrap().to_str().unwrap()
        );
        let text = fs::read_to_string(&file).unwrap();
        assert!(
            !text.contains('}'),
            "{} contains `}}`, which ends a step in a spec",
            file.display()
        );
        out.push_str(&format!("PREPARE {name} AS {};\n", text.trim_end()));
    }
    out
}

/// Drop the databases of runs whose process is gone.
async fn drop_leftovers(admin: &mut PgConnection) {
    let names: Vec<String> =
        sqlx::query_scalar("SELECT datname FROM pg_database WHERE datname LIKE $1 || '%'")
            .bind(PREFIX)
            .fetch_all(&mut *admin)
            .await
            .unwrap();
    for name in names {
        let pid = name[PREFIX.len()..].split('_').next().unwrap_or("");
        let alive = pid == std::process::id().to_string()
            || (!pid.is_empty() && Path::new("/proc").join(pid).exists());
        if !alive {
            drop_database(admin, &name).await;
        }
    }
}

async fn drop_database(admin: &mut PgConnection, name: &str) {
    admin
        .execute(format!(r#"DROP DATABASE IF EXISTS "{name}" WITH (FORCE)"#).as_str())
        .await
        .unwrap();
}

/// A database with every migration and the fixtures, to copy per spec.
async fn template(admin: &mut PgConnection) -> String {
    let name = unique_name("template");
    admin
        .execute(format!(r#"CREATE DATABASE "{name}""#).as_str())
        .await
        .unwrap();
    let db = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(server().database(&name))
        .await
        .unwrap();
    sqlx::migrate!().run(&db).await.unwrap();
    let fixtures = fs::read_to_string(root().join("tests/isolation/setup.sql")).unwrap();
    db.execute(fixtures.as_str()).await.unwrap();
    db.close().await;
    name
}

fn specs() -> Vec<String> {
    let only: Option<Vec<String>> = std::env::var("STAMPEDE_ISOLATION_SPECS")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.split(',').map(|n| n.trim().to_owned()).collect());
    let mut names: Vec<String> = fs::read_dir(root().join("tests/isolation/specs"))
        .unwrap()
        .filter_map(|e| {
            let path = e.unwrap().path();
            (path.extension()? == "spec").then(|| path.file_stem()?.to_str().map(str::to_owned))?
        })
        .filter(|name| only.as_ref().is_none_or(|only| only.contains(name)))
        .collect();
    names.sort();
    if let Some(only) = &only {
        for name in only {
            assert!(names.contains(name), "no spec named {name}");
        }
    }
    names
}

/// The errors a spec declares, by permutation (its steps joined by spaces):
/// the `# expect-error: MESSAGE` lines right above each `permutation` line.
fn declared_errors(spec: &str) -> Result<Vec<(String, Vec<String>)>, String> {
    let mut declared = Vec::new();
    let mut pending: Vec<String> = Vec::new();
    for line in spec.lines() {
        let line = line.trim();
        if let Some(message) = line.strip_prefix("# expect-error:") {
            pending.push(message.trim().to_owned());
        } else if let Some(steps) = line.strip_prefix("permutation ") {
            let steps = steps.split_whitespace().collect::<Vec<_>>().join(" ");
            declared.push((steps, std::mem::take(&mut pending)));
        } else if !pending.is_empty() && !line.starts_with('#') {
            return Err(format!(
                "`# expect-error: {}` is not directly above a permutation",
                pending[0]
            ));
        }
    }
    if let Some(message) = pending.first() {
        return Err(format!(
            "`# expect-error: {message}` is not directly above a permutation"
        ));
    }
    Ok(declared)
}

/// The `ERROR:` lines of a tester output, by permutation, in order.
fn printed_errors(output: &str) -> Vec<(String, Vec<String>)> {
    let mut printed: Vec<(String, Vec<String>)> = Vec::new();
    for line in output.lines() {
        if let Some(steps) = line.strip_prefix("starting permutation: ") {
            let steps = steps.split_whitespace().collect::<Vec<_>>().join(" ");
            printed.push((steps, Vec::new()));
        } else if let Some(message) = line.strip_prefix("ERROR:") {
            let message = message.trim().to_owned();
            match printed.last_mut() {
                Some((_, errors)) => errors.push(message),
                None => printed.push((String::new(), vec![message])),
            }
        }
    }
    printed
}

/// `Err` naming every error that `output` prints but the spec does not
/// declare for that permutation, and every declared error it does not print.
fn check_errors(spec: &str, output: &str, what: &str) -> Result<(), String> {
    let declared = declared_errors(spec)?;
    let printed = printed_errors(output);
    let mut problems = Vec::new();
    // A spec the tester could not parse prints no permutation at all (and
    // its regenerated output is just the parse error): that is a failure,
    // as is a declared permutation that did not run.
    if !printed.iter().any(|(steps, _)| !steps.is_empty()) {
        problems.push(format!("{what} runs no permutation: {}", output.trim()));
    }
    for (steps, _) in &declared {
        if !printed
            .iter()
            .any(|(printed_steps, _)| printed_steps == steps)
        {
            problems.push(format!("permutation `{steps}`: not in {what}"));
        }
    }
    for (steps, errors) in printed {
        let expected = declared
            .iter()
            .find(|(declared_steps, _)| *declared_steps == steps)
            .map(|(_, errors)| errors.as_slice())
            .unwrap_or_default();
        if errors != expected {
            problems.push(format!(
                "permutation `{steps}`: {what} prints errors {errors:?}, the spec declares {expected:?} \
                 (declare an expected one as `# expect-error: MESSAGE` above the permutation)"
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

/// Run one spec in its own database; `Err` with the diff when it fails.
fn run_spec(name: &str, database: &str, work: &Path, statements: &str) -> Result<(), String> {
    let input = work.join(name);
    let _ = fs::remove_dir_all(&input);
    fs::create_dir_all(input.join("specs")).unwrap();
    fs::create_dir_all(input.join("expected")).unwrap();
    // Every permutation starts from the fixtures and ends with a reset.
    let fixtures = fs::read_to_string(root().join("tests/isolation/fixtures.sql")).unwrap();
    let reset = fs::read_to_string(root().join("tests/isolation/reset.sql")).unwrap();
    let declared =
        fs::read_to_string(root().join(format!("tests/isolation/specs/{name}.spec"))).unwrap();
    let body = declared.replace("@statements", statements);
    let spec = format!("setup {{\n{fixtures}}}\nteardown {{\n{reset}}}\n{body}");
    fs::write(input.join(format!("specs/{name}.spec")), spec).unwrap();
    let expected = root().join(format!("tests/isolation/expected/{name}.out"));
    // PG 15's driver has no --expecteddir: it reads INPUTDIR/expected/.
    fs::write(
        input.join(format!("expected/{name}.out")),
        fs::read(&expected).unwrap_or_default(),
    )
    .unwrap();
    let connect = server();
    let output = Command::new(driver())
        .arg("--use-existing")
        .arg(format!("--host={}", connect.get_host()))
        .arg(format!("--port={}", connect.get_port()))
        .arg(format!("--user={}", connect.get_username()))
        .arg(format!("--dbname={database}"))
        .arg(format!("--inputdir={}", input.display()))
        .arg(format!("--outputdir={}", input.join("out").display()))
        .arg(name)
        .output()
        .unwrap();
    let actual = input.join(format!("out/results/{name}.out"));
    // An undeclared error fails the spec whatever the diff says: in the
    // expected file (a regenerated output that recorded an accident) and in
    // what the tester printed now (also when rewriting the expected files).
    let undeclared = |output: &Path, what: &str| {
        fs::read_to_string(output)
            .map_or(Ok(()), |text| check_errors(&declared, &text, what))
            .map_err(|problems| {
                format!("isolation spec {name}: errors against the spec\n{problems}")
            })
    };
    undeclared(&actual, "the tester's output")?;
    if std::env::var_os("STAMPEDE_UPDATE_ISOLATION").is_some_and(|v| v == "1") && actual.is_file() {
        fs::copy(&actual, &expected).unwrap();
        return Ok(());
    }
    undeclared(&expected, &format!("tests/isolation/expected/{name}.out"))?;
    if output.status.success() {
        return Ok(());
    }
    let diffs = fs::read_to_string(input.join("out/regression.diffs")).unwrap_or_default();
    Err(format!(
        "isolation spec {name} failed\n{}{}\n{diffs}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    ))
}

#[tokio::test]
async fn every_sale_path_interleaving_keeps_the_invariants() {
    let driver = driver();
    let mut admin = PgConnection::connect_with(&server()).await.unwrap();
    drop_leftovers(&mut admin).await;
    let template = template(&mut admin).await;
    let statements = prepared_statements();
    let work = std::env::temp_dir().join(unique_name("work"));
    let mut failures = Vec::new();
    let names = specs();
    assert!(!names.is_empty(), "no specs to run");
    for name in &names {
        let database = unique_name(name);
        admin
            .execute(format!(r#"CREATE DATABASE "{database}" TEMPLATE "{template}""#).as_str())
            .await
            .unwrap();
        let result = run_spec(name, &database, &work, &statements);
        drop_database(&mut admin, &database).await;
        if let Err(failure) = result {
            failures.push(failure);
        }
    }
    drop_database(&mut admin, &template).await;
    if failures.is_empty() {
        let _ = fs::remove_dir_all(&work);
    }
    assert!(
        failures.is_empty(),
        "{} of {} isolation specs failed (driver {}, work files in {}):\n\n{}",
        failures.len(),
        names.len(),
        driver.display(),
        work.display(),
        failures.join("\n\n")
    );
}

/// The runner's own check, on outputs shaped like the tester's.
mod declared_errors {
    use super::check_errors;

    const SPEC: &str = "\
session s
step a { SELECT 1; }
step b { SELECT 2; }
# Both succeed.
permutation a b
# The second fails on its own constraint.
# expect-error: new row violates check constraint \"x\"
permutation b a
";

    fn output(first: &str, second: &str) -> String {
        format!(
            "Parsed test spec with 1 sessions\n\n\
             starting permutation: a b\nstep a: SELECT 1;\n{first}\n\n\
             starting permutation: b a\nstep b: SELECT 2;\n{second}\nstep a: SELECT 1;\n"
        )
    }

    #[test]
    fn a_spec_the_tester_cannot_parse_fails() {
        let err = check_errors(SPEC, "syntax error at line 67\n", "out").unwrap_err();
        assert!(err.contains("runs no permutation"), "{err}");
        assert!(err.contains("permutation `a b`: not in out"), "{err}");
    }

    #[test]
    fn a_declared_error_passes() {
        let out = output("", "ERROR:  new row violates check constraint \"x\"");
        assert_eq!(check_errors(SPEC, &out, "out"), Ok(()));
    }

    #[test]
    fn an_error_in_a_permutation_that_declares_none_fails() {
        // The shape of the regenerated publish.out: a statement called with
        // the wrong number of parameters, recorded as the expected output.
        let out = output(
            "ERROR:  wrong number of parameters for prepared statement \"events_save\"",
            "ERROR:  new row violates check constraint \"x\"",
        );
        let err = check_errors(SPEC, &out, "out").unwrap_err();
        assert!(err.contains("permutation `a b`"), "{err}");
        assert!(err.contains("events_save"), "{err}");
    }

    #[test]
    fn a_declared_error_that_does_not_happen_fails() {
        let err = check_errors(SPEC, &output("", ""), "out").unwrap_err();
        assert!(err.contains("permutation `b a`"), "{err}");
    }

    #[test]
    fn another_error_than_the_declared_one_fails() {
        let out = output("", "ERROR:  deadlock detected");
        assert!(check_errors(SPEC, &out, "out").is_err());
    }

    #[test]
    fn a_declaration_not_above_a_permutation_is_refused() {
        let spec = "# expect-error: x\nstep a { SELECT 1; }\npermutation a\n";
        assert!(check_errors(spec, "", "out").is_err());
    }
}
