//! A private PostgreSQL cluster for fault tests that stop and start the
//! database: the shared server on 5432 is never touched. It runs from a
//! temporary data directory on a free port, as the `postgres` OS user when
//! the tests run as root (Postgres refuses to run as root).

use std::{
    path::{Path, PathBuf},
    process::Command,
};

pub struct PrivateCluster {
    bin: PathBuf,
    data: PathBuf,
    pub port: u16,
}

impl PrivateCluster {
    /// initdb a new cluster (trust auth, superuser `postgres`) and start it.
    pub fn start() -> Self {
        let bin = postgres_bin_dir();
        let data = std::env::temp_dir().join(format!("stampede-pg-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir(&data).unwrap();
        if running_as_root() {
            run(Command::new("chown").arg("postgres:").arg(&data));
        }
        let port = super::free_port();
        let cluster = Self { bin, data, port };
        run(&mut cluster.pg_command(
            "initdb",
            &[
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
                "-D",
            ],
        ));
        cluster.start_server();
        cluster
    }

    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// Start the server and wait until it accepts connections.
    pub fn start_server(&self) {
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {} -c max_connections=60",
            self.port,
            self.data.display()
        );
        let log = self.data.join("server.log");
        run(&mut self.pg_command(
            "pg_ctl",
            &[
                "-w",
                "-t",
                "60",
                "-l",
                &log.display().to_string(),
                "-o",
                &options,
                "start",
                "-D",
            ],
        ));
    }

    /// Stop the server the hard way, as a crash would: every backend is
    /// killed at once and the next start replays the WAL.
    pub fn crash_server(&self) {
        run(&mut self.pg_command("pg_ctl", &["-w", "-m", "immediate", "stop", "-D"]));
    }

    /// `tool` from the server's bin directory with `args` then the data
    /// directory, as the user the cluster belongs to.
    fn pg_command(&self, tool: &str, args: &[&str]) -> Command {
        let mut command = if running_as_root() {
            let mut runuser = Command::new("runuser");
            runuser
                .args(["-u", "postgres", "--"])
                .arg(self.bin.join(tool));
            runuser
        } else {
            Command::new(self.bin.join(tool))
        };
        command.args(args).arg(&self.data);
        command
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let _ = self
            .pg_command("pg_ctl", &["-w", "-m", "immediate", "stop", "-D"])
            .output();
        let _ = std::fs::remove_dir_all(&self.data);
    }
}

fn running_as_root() -> bool {
    let out = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

/// Where initdb and pg_ctl live: `pg_config --bindir`, else the newest
/// `/usr/lib/postgresql/*/bin` (Debian keeps them off the PATH).
fn postgres_bin_dir() -> PathBuf {
    let from_pg_config = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
        .filter(|dir| dir.join("initdb").exists());
    from_pg_config
        .or_else(|| {
            let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
                .ok()?
                .filter_map(|entry| Some(entry.ok()?.path().join("bin")))
                .filter(|dir| dir.join("initdb").exists())
                .collect();
            dirs.sort_by_key(|dir| version_of(dir));
            dirs.pop()
        })
        .expect("initdb: install the PostgreSQL server package")
}

fn version_of(bin: &Path) -> u32 {
    bin.parent()
        .and_then(|dir| dir.file_name()?.to_str()?.parse().ok())
        .unwrap_or(0)
}

fn run(command: &mut Command) {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{command:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
