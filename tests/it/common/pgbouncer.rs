//! A real PgBouncer (Debian's 1.18; ./scripts/test installs it) in
//! transaction pooling in front of the test's Postgres, on a free loopback
//! port, started in the foreground and stopped with the test, from
//! deploy/local/pgbouncer.ini (what Stampede's `--db-transaction-pooler`
//! expects) with this test's ports.

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

use sqlx::{Connection as _, postgres::PgConnectOptions};

pub struct PgBouncer {
    child: Child,
    pub port: u16,
    dir: PathBuf,
}

impl PgBouncer {
    /// In front of the server `direct` points at, with `server_connections`
    /// server connections per database: fewer than the clients, so that
    /// clients share them the way a pooler in production makes them.
    pub async fn start(direct: &PgConnectOptions, server_connections: u32) -> Self {
        let binary = "/usr/sbin/pgbouncer";
        assert!(
            std::path::Path::new(binary).exists(),
            "{binary} is missing: run `apt-get install -y pgbouncer` (./scripts/test does this when it runs as root or can sudo)"
        );
        let port = super::free_port();
        let dir = std::env::temp_dir().join(format!("stampede-pgbouncer-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let user = direct.get_username();
        let host = direct.get_host();
        let server_port = direct.get_port();
        // PgBouncer will not run as root: as root it switches to `postgres`
        // (-u), which must read these files.
        std::fs::write(dir.join("userlist.txt"), format!("\"{user}\" \"\"\n")).unwrap();
        // The shipped configuration, pointed at this test's server and port.
        let shipped = include_str!("../../../deploy/local/pgbouncer.ini");
        let config: String = shipped
            .lines()
            .map(|line| match line.split_once(" = ").map(|(key, _)| key) {
                Some("*") => format!("* = host={host} port={server_port}"),
                Some("listen_port") => format!("listen_port = {port}"),
                Some("auth_file") => format!("auth_file = {}", dir.join("userlist.txt").display()),
                Some("default_pool_size") => format!("default_pool_size = {server_connections}"),
                _ => line.to_owned(),
            })
            .map(|line| line + "\n")
            .collect();
        assert!(
            config.contains(&format!("listen_port = {port}")),
            "{config}"
        );
        let path = dir.join("pgbouncer.ini");
        std::fs::write(&path, config).unwrap();
        set_readable_by_all(&dir);
        let mut command = Command::new(binary);
        if running_as_root() {
            command.args(["-u", "postgres"]);
        }
        let child = command
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start pgbouncer");
        let bouncer = Self { child, port, dir };
        for _ in 0..200 {
            if let Ok(conn) = sqlx::PgConnection::connect_with(&bouncer.options(direct)).await {
                let _ = conn.close().await;
                return bouncer;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("pgbouncer did not accept a connection on {port}");
    }

    /// `direct`, but through the pooler.
    pub fn options(&self, direct: &PgConnectOptions) -> PgConnectOptions {
        direct.clone().host("127.0.0.1").port(self.port)
    }
}

/// Whether this process runs as root (PgBouncer and Postgres refuse to).
pub fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| out.stdout.trim_ascii() == b"0")
}

fn set_readable_by_all(dir: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt as _;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
