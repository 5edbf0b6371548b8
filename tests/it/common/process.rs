//! The real `stampede serve` binary as a child process, and raw sockets to
//! talk to it from chosen loopback addresses.

use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr},
    process::{Child, Command, Stdio},
    time::Duration,
};

use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{TcpSocket, TcpStream},
};

/// A `stampede serve` child process, killed on drop (use [`Self::stop`] for
/// a graceful stop).
pub struct ServerProcess {
    child: Child,
    pub addr: SocketAddr,
    pub base: String,
    /// The metrics listener's base URL (`--metrics-listen`).
    pub metrics_base: String,
}

impl ServerProcess {
    /// Start on a free port with `args` after the defaults the tests use.
    pub async fn start(database_url: &str, args: &[&str]) -> Self {
        Self::start_with_file_limit(database_url, args, None).await
    }

    /// As [`Self::start`], with the open file limit (soft and hard) set to
    /// `file_limit` before the binary starts.
    pub async fn start_with_file_limit(
        database_url: &str,
        args: &[&str],
        file_limit: Option<u32>,
    ) -> Self {
        // A free port can be taken (by another process's outgoing
        // connection) before the server binds it: a server that exits at
        // start-up is started again on new ports.
        for attempt in 1..=3 {
            if let Some(server) = Self::try_start(database_url, args, file_limit).await {
                return server;
            }
            eprintln!("stampede serve exited at start-up (attempt {attempt}); starting it again");
        }
        panic!("stampede serve exited at start-up three times");
    }

    /// One start: `None` if the process exits before it is healthy.
    async fn try_start(database_url: &str, args: &[&str], file_limit: Option<u32>) -> Option<Self> {
        let (port, metrics_port) = (super::free_port(), super::free_port());
        let binary = env!("CARGO_BIN_EXE_stampede");
        let mut command = match file_limit {
            // `ulimit -n` in sh sets both limits; exec keeps the pid.
            Some(limit) => {
                let mut sh = Command::new("sh");
                sh.args(["-c", &format!("ulimit -n {limit} && exec \"$0\" \"$@\"")])
                    .arg(binary);
                sh
            }
            None => Command::new(binary),
        };
        let child = command
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--metrics-listen", &format!("127.0.0.1:{metrics_port}")])
            .args(["--database-url", database_url, "--db-max-connections", "8"])
            .args(args)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .expect("start stampede serve");
        // Owned at once, so that Drop reaps it on any panic.
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut server = Self {
            child,
            addr,
            base: format!("http://{addr}"),
            metrics_base: format!("http://127.0.0.1:{metrics_port}"),
        };
        let client = reqwest::Client::new();
        // Behind the PROXY protocol the site's listener takes only what a
        // balancer sends: ask the metrics listener instead.
        let probe = if args.contains(&"--proxy-protocol") {
            server.metrics_url()
        } else {
            server.url("/healthz")
        };
        for _ in 0..200 {
            // `connection: close`: no idle connection of ours outlives start-up.
            let health = client
                .get(&probe)
                .header("connection", "close")
                .send()
                .await;
            if health.is_ok_and(|r| r.status().is_success()) {
                return Some(server);
            }
            if !server.is_running() {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("stampede serve did not become healthy on port {port}");
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `GET /metrics` on the metrics listener.
    pub fn metrics_url(&self) -> String {
        format!("{}/metrics", self.metrics_base)
    }

    /// Resident memory of the process (VmRSS), in KiB.
    pub fn resident_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the server process is alive");
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in /proc/PID/status")
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// SIGKILL: the process ends at once, whatever it was doing.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Send SIGTERM, without waiting.
    pub fn terminate(&self) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(sent.success());
    }

    /// Wait (up to 5 s) for the process to exit by itself with success.
    pub fn wait_for_clean_exit(mut self) {
        for _ in 0..100 {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "stampede exited with {status}");
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("stampede did not stop within 5 s");
    }

    /// Graceful shutdown: SIGTERM, then the process exits by itself with 0.
    pub fn stop(self) {
        self.terminate();
        self.wait_for_clean_exit();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `127.0.0.n`: Linux routes all of 127/8 to loopback, so each is another
/// client address as far as per-address limits go.
pub fn loopback(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, n))
}

/// A TCP connection to `server` from the source address `from`.
pub async fn connect_from(from: IpAddr, server: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(from, 0)).unwrap();
    socket.connect(server).await.unwrap()
}

/// A client whose connections come from `from`.
pub fn client_from(from: IpAddr) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(from)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// What a raw connection saw: the status of the first response, if any,
/// and whether the server closed (or reset) the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ending {
    pub status: Option<u16>,
    pub closed: bool,
}

/// Read until the server closes the connection, for at most `wait`.
pub async fn ending(stream: &mut TcpStream, wait: Duration) -> Ending {
    let mut seen = Vec::new();
    let mut buf = [0_u8; 4096];
    let read_all = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    };
    let closed = tokio::time::timeout(wait, read_all).await.is_ok();
    Ending {
        status: status_of(&seen),
        closed,
    }
}

/// The status code of the first response in `bytes`, if one is there.
pub fn status_of(bytes: &[u8]) -> Option<u16> {
    let text = std::str::from_utf8(bytes.get(..12)?).ok()?;
    text.strip_prefix("HTTP/1.1 ")?.parse().ok()
}

/// Write `bytes`; the server may already have closed, which is fine.
pub async fn send(stream: &mut TcpStream, bytes: &[u8]) {
    let _ = stream.write_all(bytes).await;
}
