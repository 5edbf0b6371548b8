//! A Postgres server of the test's own (Debian's binaries, a fresh cluster
//! in a temporary directory, on a free loopback port), for faults that
//! would disturb every other test on the machine's server: a restart.
//! Stopped and removed with the test.

use std::{
    path::PathBuf,
    process::{Command, Stdio},
    time::Duration,
};

use sqlx::postgres::PgConnectOptions;

use super::pgbouncer::running_as_root;

const BIN: &str = "/usr/lib/postgresql/15/bin";

pub struct PrivatePostgres {
    dir: PathBuf,
    pub port: u16,
}

/// `program args` as the `postgres` user when this runs as root (Postgres
/// refuses root), else as this user.
fn as_postgres(program: &str, args: &[&str]) -> std::process::ExitStatus {
    let root = running_as_root();
    let mut command = if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--", program]);
        c
    } else {
        Command::new(program)
    };
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap_or_else(|err| panic!("running {program}: {err}"))
}

impl PrivatePostgres {
    /// A fresh cluster, started; its superuser is this process's user name,
    /// trusted on loopback.
    pub async fn start() -> Self {
        let port = super::free_port();
        let dir = std::env::temp_dir().join(format!("stampede-pg-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        if running_as_root() {
            let status = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(&dir)
                .status()
                .unwrap();
            assert!(status.success(), "chown {}", dir.display());
        }
        let user = whoami();
        let data = dir.join("data");
        let status = as_postgres(
            &format!("{BIN}/initdb"),
            &[
                "-D",
                data.to_str().unwrap(),
                "--auth=trust",
                &format!("--username={user}"),
                "--no-sync",
            ],
        );
        assert!(status.success(), "initdb failed");
        let server = Self { dir, port };
        server.pg_ctl("start");
        server.wait_ready().await;
        server
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn pg_ctl(&self, action: &str) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60",
            self.port,
            self.dir.display()
        );
        let log = self.dir.join("log");
        let status = as_postgres(
            &format!("{BIN}/pg_ctl"),
            &[
                "-D",
                self.data().to_str().unwrap(),
                "-l",
                log.to_str().unwrap(),
                "-o",
                &options,
                "-m",
                "fast",
                "-w",
                action,
            ],
        );
        assert!(status.success(), "pg_ctl {action} failed");
    }

    async fn wait_ready(&self) {
        for _ in 0..200 {
            let ready = Command::new(format!("{BIN}/pg_isready"))
                .args(["-q", "-h", "127.0.0.1", "-p", &self.port.to_string()])
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the private Postgres did not come up on {}", self.port);
    }

    /// Stop (fast: connections are cut) and start again, waiting for it
    /// (`pg_ctl -w`). Blocking: call it from a thread of its own.
    pub fn restart(&self) {
        self.pg_ctl("restart");
    }

    /// Options for `database` on it.
    pub fn options(&self, database: &str) -> PgConnectOptions {
        PgConnectOptions::new()
            .host("127.0.0.1")
            .port(self.port)
            .username(&whoami())
            .database(database)
    }
}

fn whoami() -> String {
    let out = Command::new("id").arg("-un").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let _ = as_postgres(
            &format!("{BIN}/pg_ctl"),
            &[
                "-D",
                self.data().to_str().unwrap(),
                "-m",
                "immediate",
                "stop",
            ],
        );
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
