//! A bare HTTP/1 client: one kept-alive hyper connection per virtual buyer,
//! reconnected after an error or a time-out. No pool, no TLS, no redirects.

use std::{
    net::{SocketAddr, ToSocketAddrs},
    time::{Duration, Instant},
};

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{
    HeaderMap, Method, Request, StatusCode, Uri,
    client::conn::http1::{self, SendRequest},
    header::{self, HeaderValue},
};
use hyper_util::rt::TokioIo;
use tokio::{net::TcpStream, task::JoinHandle};

/// One server: where to connect and what to send as `Host`.
#[derive(Debug, Clone)]
pub struct Target {
    pub base: String,
    addr: SocketAddr,
    host: HeaderValue,
}

impl Target {
    /// `http://HOST:PORT` (a trailing `/` is fine, a path is not).
    pub fn parse(url: &str) -> anyhow::Result<Self> {
        let authority = url
            .strip_prefix("http://")
            .with_context(|| format!("{url}: only plain http:// URLs are supported"))?
            .trim_end_matches('/');
        anyhow::ensure!(
            !authority.is_empty() && !authority.contains('/'),
            "{url}: give the server's base URL, without a path"
        );
        let with_port = if authority
            .rsplit_once(':')
            .is_some_and(|(_, p)| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        {
            authority.to_owned()
        } else {
            format!("{authority}:80")
        };
        let addr = with_port
            .to_socket_addrs()
            .with_context(|| format!("resolving {authority}"))?
            .next()
            .with_context(|| format!("{authority} resolves to no address"))?;
        Ok(Self {
            base: format!("http://{authority}"),
            addr,
            host: HeaderValue::from_str(authority)?,
        })
    }

    pub fn request(&self, method: Method, uri: Uri) -> hyper::http::request::Builder {
        Request::builder()
            .method(method)
            .uri(uri)
            .header(header::HOST, self.host.clone())
    }
}

/// What went wrong below HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    Connect,
    Timeout,
    /// The connection broke mid-request (reset, closed early).
    Io,
}

impl Failure {
    pub fn name(self) -> &'static str {
        match self {
            Self::Connect => "connect",
            Self::Timeout => "timeout",
            Self::Io => "connection",
        }
    }
}

/// A whole response, body read.
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

struct Open {
    sender: SendRequest<Full<Bytes>>,
    driver: JoinHandle<()>,
}

/// One kept-alive connection to one target.
pub struct Conn {
    pub target: Target,
    open: Option<Open>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.close();
    }
}

impl Conn {
    pub fn new(target: Target) -> Self {
        Self { target, open: None }
    }

    pub async fn connect(&mut self) -> Result<(), Failure> {
        if self.open.as_ref().is_some_and(|o| !o.sender.is_closed()) {
            return Ok(());
        }
        self.close();
        let stream = TcpStream::connect(self.target.addr)
            .await
            .map_err(|_| Failure::Connect)?;
        stream.set_nodelay(true).map_err(|_| Failure::Connect)?;
        let (sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|_| Failure::Connect)?;
        let driver = tokio::spawn(async move {
            let _ = connection.await;
        });
        self.open = Some(Open { sender, driver });
        Ok(())
    }

    fn close(&mut self) {
        if let Some(open) = self.open.take() {
            open.driver.abort();
        }
    }

    /// Send one request and read the whole answer within `timeout`. After
    /// any failure the connection is dropped; the next call reconnects.
    pub async fn send(
        &mut self,
        request: Request<Full<Bytes>>,
        timeout: Duration,
    ) -> Result<Reply, Failure> {
        let result = tokio::time::timeout(timeout, self.exchange(request)).await;
        let result = result.unwrap_or(Err(Failure::Timeout));
        if result.is_err() {
            self.close();
        }
        result
    }

    async fn exchange(&mut self, request: Request<Full<Bytes>>) -> Result<Reply, Failure> {
        self.connect().await?;
        let open = self.open.as_mut().ok_or(Failure::Connect)?;
        open.sender.ready().await.map_err(|_| Failure::Io)?;
        let response = open
            .sender
            .send_request(request)
            .await
            .map_err(|_| Failure::Io)?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await.map_err(|_| Failure::Io)?.to_bytes();
        Ok(Reply {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    }
}

/// Poll `GET /healthz` until it answers 2xx, for at most `limit`.
pub async fn wait_ready(target: &Target, limit: Duration) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut conn = Conn::new(target.clone());
    loop {
        let request = target
            .request(Method::GET, Uri::from_static("/healthz"))
            .body(Full::default())?;
        if let Ok(reply) = conn.send(request, Duration::from_secs(2)).await
            && reply.status.is_success()
        {
            return Ok(());
        }
        if started.elapsed() > limit {
            anyhow::bail!("{} did not answer /healthz within {limit:?}", target.base);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_plain_http_base_urls() {
        let t = Target::parse("http://127.0.0.1:3000/").unwrap();
        assert_eq!(t.addr, "127.0.0.1:3000".parse().unwrap());
        assert_eq!(t.host, "127.0.0.1:3000");
        assert!(Target::parse("https://127.0.0.1:3000").is_err());
        assert!(Target::parse("http://127.0.0.1:3000/events").is_err());
        assert_eq!(Target::parse("http://127.0.0.1").unwrap().addr.port(), 80);
    }
}
