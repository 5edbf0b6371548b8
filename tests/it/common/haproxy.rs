//! A real HAProxy (Debian's `haproxy`; ./scripts/test installs it) in front
//! of `stampede serve` instances, on a free loopback port, started in the
//! foreground and stopped with the test.

use std::{
    net::SocketAddr,
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

/// How HAProxy tells the instances who the client is.
#[derive(Debug, Clone, Copy)]
pub enum Forwarding {
    /// The PROXY protocol v2 (`send-proxy-v2`) on every connection.
    ProxyProtocol,
    /// `X-Forwarded-For` (`option forwardfor`).
    ForwardedFor,
}

pub struct Haproxy {
    child: Child,
    pub addr: SocketAddr,
    dir: PathBuf,
}

impl Haproxy {
    /// In front of `backends`, health-checking `/readyz` every 200 ms.
    pub async fn start(backends: &[SocketAddr], forwarding: Forwarding) -> Self {
        let binary = "/usr/sbin/haproxy";
        assert!(
            std::path::Path::new(binary).exists(),
            "{binary} is missing: run `apt-get install -y haproxy` (./scripts/test does this when it runs as root or can sudo)"
        );
        let port = super::free_port();
        let dir = std::env::temp_dir().join(format!("stampede-haproxy-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let (server_options, frontend_options) = match forwarding {
            Forwarding::ProxyProtocol => ("send-proxy-v2 check-send-proxy", ""),
            Forwarding::ForwardedFor => ("", "  option forwardfor\n"),
        };
        let servers: String = backends
            .iter()
            .enumerate()
            .map(|(i, addr)| {
                format!("  server s{i} {addr} {server_options} check inter 200ms fall 2 rise 1\n")
            })
            .collect();
        // `retries` with `redispatch`: a connection an instance refused (it
        // is gone) is tried at once on another; the request was never
        // sent, so this is safe for a purchase too. Without redispatch
        // HAProxy retries the same instance after a second each time.
        let config = format!(
            "global\n  maxconn 4096\n\
             defaults\n  mode http\n  timeout connect 2s\n  timeout client 30s\n  timeout server 30s\n\
             \x20 retries 3\n  option redispatch 1\n\
             frontend site\n  bind 127.0.0.1:{port}\n{frontend_options}  default_backend instances\n\
             backend instances\n  option httpchk GET /readyz\n{servers}"
        );
        let path = dir.join("haproxy.cfg");
        std::fs::write(&path, config).unwrap();
        let child = Command::new(binary)
            .args(["-db", "-f"])
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start haproxy");
        let proxy = Self {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            dir,
        };
        // Up once a request goes through to an instance.
        let client = reqwest::Client::new();
        for _ in 0..200 {
            let health = client
                .get(format!("http://{}/healthz", proxy.addr))
                .header("connection", "close")
                .send()
                .await;
            if health.is_ok_and(|r| r.status().is_success()) {
                return proxy;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("haproxy did not pass a request to an instance");
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
