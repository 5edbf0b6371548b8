//! A RabbitMQ node of the test's own, for faults that would disturb every
//! other test on the machine's broker (127.0.0.1:5672): a stop and a start.
//! Debian's `rabbitmq-server` run as this user, with its data, logs,
//! config, plugins file and Erlang cookie (`HOME`) in a temporary
//! directory, listening on loopback only; a stop keeps the data directory,
//! so durable queues and persistent messages are there when it starts
//! again. Killed (its whole process group) and removed on drop.

use std::{
    net::{Ipv4Addr, SocketAddr, TcpListener},
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use lapin::{Connection, ConnectionProperties};

/// The server script itself: `/usr/sbin/rabbitmq-server` would `su` to the
/// `rabbitmq` user (and its `HOME`, the shared node's cookie) when run as
/// root.
const SERVER: &str = "/usr/lib/rabbitmq/bin/rabbitmq-server";

/// How long a start may take (5 to 15 s on a busy 2-core machine).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a graceful stop may take.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

pub struct RabbitNode {
    dir: PathBuf,
    /// The AMQP port, on 127.0.0.1.
    pub port: u16,
    dist_port: u16,
    /// `stampede-test-<port>@localhost`.
    pub name: String,
    /// The `rabbitmq-server` script (the leader of its process group):
    /// it turns a SIGTERM into a graceful stop of the Erlang VM and waits
    /// for it. `None` while stopped.
    child: Option<Child>,
}

/// `addr`, which must be a loopback address: nothing here talks to another
/// host.
pub fn loopback_only(addr: SocketAddr) -> SocketAddr {
    assert!(addr.ip().is_loopback(), "{addr} is not a loopback address");
    addr
}

/// A free port on 127.0.0.1 below the kernel's ephemeral range, so that no
/// client's outgoing connection and no other test's `free_port()` (port 0)
/// can take it while the node is stopped and its port unbound.
fn free_fixed_port(taken: &[u16]) -> u16 {
    let ephemeral_low: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768);
    // Above 26000: 25672 is the shared node's distribution port.
    let (low, high) = (26_000_u16, ephemeral_low.max(26_100));
    for _ in 0..1000 {
        let draw = (uuid::Uuid::new_v4().as_u128() % u128::from(high - low)) as u16;
        let port = low + draw;
        if taken.contains(&port) {
            continue;
        }
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {low}..{high} for a private RabbitMQ node");
}

impl RabbitNode {
    /// A fresh node, started and answering AMQP (guest/guest, which the
    /// broker lets in from loopback only).
    pub async fn start() -> Self {
        let port = free_fixed_port(&[]);
        let dist_port = free_fixed_port(&[port]);
        let dir = std::env::temp_dir().join(format!("stampede-rabbitmq-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        // Its own environment file, config and plugins (none): nothing of
        // /etc/rabbitmq (the shared node's name and listener) applies.
        std::fs::write(dir.join("rabbitmq-env.conf"), "").unwrap();
        std::fs::write(
            dir.join("rabbitmq.conf"),
            format!("listeners.tcp.local = 127.0.0.1:{port}\nloopback_users.guest = true\n"),
        )
        .unwrap();
        std::fs::write(dir.join("enabled_plugins"), "[].\n").unwrap();
        let mut node = Self {
            dir,
            port,
            dist_port,
            name: format!("stampede-test-{port}@localhost"),
            child: None,
        };
        node.spawn();
        node.until_up().await;
        node
    }

    /// `amqp://guest:guest@127.0.0.1:<port>/%2f`.
    pub fn url(&self) -> String {
        format!("amqp://guest:guest@{}/%2f", self.addr())
    }

    pub fn addr(&self) -> SocketAddr {
        loopback_only(SocketAddr::from((Ipv4Addr::LOCALHOST, self.port)))
    }

    fn spawn(&mut self) {
        assert!(self.child.is_none(), "the node is already running");
        assert!(
            Path::new(SERVER).exists(),
            "{SERVER} is missing: run `apt-get install -y rabbitmq-server` (./scripts/test does)"
        );
        let dir = &self.dir;
        let output = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("output.log"))
            .unwrap();
        let child = Command::new(SERVER)
            .current_dir(dir)
            .env("HOME", dir)
            .env("RABBITMQ_CONF_ENV_FILE", dir.join("rabbitmq-env.conf"))
            .env("RABBITMQ_CONFIG_FILE", dir.join("rabbitmq.conf"))
            .env("RABBITMQ_ADVANCED_CONFIG_FILE", dir.join("advanced.config"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", dir.join("enabled_plugins"))
            .env("RABBITMQ_MNESIA_BASE", dir.join("mnesia"))
            .env("RABBITMQ_LOG_BASE", dir.join("log"))
            .env("RABBITMQ_PID_FILE", dir.join("node.pid"))
            .env("RABBITMQ_NODENAME", &self.name)
            .env("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_NODE_PORT", self.port.to_string())
            .env("RABBITMQ_DIST_PORT", self.dist_port.to_string())
            // Erlang distribution and epmd (shared, started if missing) on
            // loopback only.
            .env("ERL_EPMD_ADDRESS", "127.0.0.1")
            .env("ERL_FLAGS", "-kernel inet_dist_use_interface {127,0,0,1}")
            .stdin(Stdio::null())
            .stdout(output.try_clone().unwrap())
            .stderr(output)
            // A group of its own: the script, the VM and its helpers are
            // killed together on drop.
            .process_group(0)
            .spawn()
            .unwrap_or_else(|err| panic!("start {SERVER}: {err}"));
        self.child = Some(child);
    }

    /// Wait (bounded) until the node takes an AMQP connection; panics with
    /// the end of its logs if it does not, or if it exits.
    async fn until_up(&mut self) {
        let deadline = tokio::time::Instant::now() + START_TIMEOUT;
        let url = self.url();
        loop {
            let attempt = tokio::time::timeout(
                Duration::from_secs(5),
                Connection::connect(&url, ConnectionProperties::default()),
            )
            .await;
            if let Ok(Ok(connection)) = attempt {
                let _ = connection.close(200, "up".into()).await;
                return;
            }
            let exited = self.child.as_mut().unwrap().try_wait().unwrap();
            if let Some(status) = exited {
                self.child = None;
                panic!(
                    "RabbitMQ node {} exited ({status}) while starting:\n{}",
                    self.name,
                    self.log_tail()
                );
            }
            if tokio::time::Instant::now() >= deadline {
                panic!(
                    "RabbitMQ node {} did not take connections on {} within {START_TIMEOUT:?}:\n{}",
                    self.name,
                    self.addr(),
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// A graceful stop: SIGTERM to the script, which stops the VM the way
    /// `rabbitmqctl stop` does (queues and the message store closed
    /// cleanly), then waits (bounded) for it to exit.
    pub async fn stop(&mut self) {
        let mut child = self.child.take().expect("the node is running");
        let sent = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill -TERM {}", child.id());
        let deadline = tokio::time::Instant::now() + STOP_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                assert!(
                    status.success(),
                    "RabbitMQ node {} stopped with {status}:\n{}",
                    self.name,
                    self.log_tail()
                );
                return;
            }
            if tokio::time::Instant::now() >= deadline {
                // Back in place for Drop to kill.
                self.child = Some(child);
                panic!(
                    "RabbitMQ node {} did not stop within {STOP_TIMEOUT:?}:\n{}",
                    self.name,
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Start the stopped node again on the same data directory, name and
    /// ports, and wait until it takes connections.
    pub async fn start_again(&mut self) {
        self.spawn();
        self.until_up().await;
    }

    /// The last lines of the script's output and of the node's log.
    pub fn log_tail(&self) -> String {
        let tail = |path: PathBuf| {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let from = lines.len().saturating_sub(40);
            format!("--- {}\n{}\n", path.display(), lines[from..].join("\n"))
        };
        tail(self.dir.join("output.log"))
            + &tail(self.dir.join("log").join(format!("{}.log", self.name)))
    }
}

impl Drop for RabbitNode {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // The whole group: the script, the Erlang VM and its helpers.
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .stderr(Stdio::null())
                .status();
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
