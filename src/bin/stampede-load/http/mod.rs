//! HTTP/1.1 for the generator: one kept-alive connection per virtual buyer,
//! one request at a time, reconnected after an error or a time-out.
//!
//! The generator shares two cores with the server and Postgres, so its own
//! CPU per request is part of every figure it measures. Measured on this
//! (busy) machine against examples/hello.rs, 64 connections, CPU per
//! request: reqwest ~55 µs, a hyper client connection ~25 µs (~23 µs when
//! driven in the caller's task), a request written by hand and framed with
//! httparse ~15 µs, one `sendto` and one `recvfrom` per request (strace).
//! So that is what this is: the request line and a few headers written by
//! hand, the answer framed with httparse (hyper's own parser):
//! `Content-Length` or chunked bodies, `Connection: close`. No TLS, no
//! redirects, no pipelining.

mod frame;

use std::{
    net::{SocketAddr, ToSocketAddrs},
    time::{Duration, Instant},
};

use anyhow::Context;
use bytes::{Bytes, BytesMut};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use frame::{Body, Framed, frame, frame_at_eof};

/// One server: where to connect and what to send as `Host`.
#[derive(Debug, Clone)]
pub struct Target {
    pub base: String,
    addr: SocketAddr,
    host: String,
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
        let has_port = authority
            .rsplit_once(':')
            .is_some_and(|(_, p)| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        let with_port = if has_port {
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
            host: authority.to_owned(),
        })
    }
}

/// A request to send: `headers` are extra to `Host` and `Content-Length`.
pub struct Request<'a> {
    pub method: &'static str,
    pub path: &'a str,
    pub headers: &'a [(&'static str, &'a str)],
    pub body: &'a [u8],
}

impl<'a> Request<'a> {
    pub fn get(path: &'a str) -> Self {
        Self {
            method: "GET",
            path,
            headers: &[],
            body: &[],
        }
    }
}

/// What went wrong below HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    Connect,
    Timeout,
    /// The connection broke or the answer was not HTTP.
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
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    /// The status line and headers, as received.
    head: Bytes,
    pub body: Bytes,
}

impl Reply {
    /// The values of every header called `name`.
    pub fn headers(&self, name: &str) -> Vec<String> {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut response = httparse::Response::new(&mut headers);
        if response.parse(&self.head).is_err() {
            return Vec::new();
        }
        response
            .headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case(name))
            .filter_map(|h| std::str::from_utf8(h.value).ok().map(str::to_owned))
            .collect()
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers(name).into_iter().next()
    }
}

#[cfg(test)]
impl Reply {
    /// A whole raw response, framed as if it had come off a connection.
    pub fn from_raw(raw: &[u8]) -> Self {
        let Ok(Framed::Complete(answer)) = frame(raw) else {
            panic!("not a whole response");
        };
        let body = match answer.body {
            Body::Within(start, end) => Bytes::copy_from_slice(&raw[start..end]),
            Body::Decoded(body) => Bytes::from(body),
        };
        Self {
            status: answer.status,
            head: Bytes::copy_from_slice(&raw[..answer.head]),
            body,
        }
    }
}

/// One kept-alive connection to one target.
pub struct Conn {
    pub target: Target,
    /// The address to connect from (any 127.0.0.0/8 address on loopback),
    /// so that a server sees many clients; `None`: the system's choice.
    local: Option<std::net::IpAddr>,
    stream: Option<TcpStream>,
    out: Vec<u8>,
    buf: BytesMut,
}

impl Conn {
    pub fn new(target: Target) -> Self {
        Self {
            target,
            local: None,
            stream: None,
            out: Vec::with_capacity(1024),
            buf: BytesMut::with_capacity(16 * 1024),
        }
    }

    /// A connection from `local` (see [`Conn::local`]).
    pub fn from_address(target: Target, local: std::net::IpAddr) -> Self {
        Self {
            local: Some(local),
            ..Self::new(target)
        }
    }

    pub async fn connect(&mut self) -> Result<(), Failure> {
        if self.stream.is_none() {
            let stream = match self.local {
                None => TcpStream::connect(self.target.addr)
                    .await
                    .map_err(|_| Failure::Connect)?,
                Some(local) => {
                    let socket = match local {
                        std::net::IpAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
                        std::net::IpAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
                    }
                    .map_err(|_| Failure::Connect)?;
                    socket
                        .bind(SocketAddr::new(local, 0))
                        .map_err(|_| Failure::Connect)?;
                    socket
                        .connect(self.target.addr)
                        .await
                        .map_err(|_| Failure::Connect)?
                }
            };
            stream.set_nodelay(true).map_err(|_| Failure::Connect)?;
            self.buf.clear();
            self.stream = Some(stream);
        }
        Ok(())
    }

    /// Send one request and read the whole answer within `timeout`. After
    /// any failure the connection is dropped; the next call reconnects.
    pub async fn send(
        &mut self,
        request: &Request<'_>,
        timeout: Duration,
    ) -> Result<Reply, Failure> {
        let result = tokio::time::timeout(timeout, self.exchange(request)).await;
        let result = result.unwrap_or(Err(Failure::Timeout));
        if result.is_err() {
            self.stream = None;
        }
        result
    }

    async fn exchange(&mut self, request: &Request<'_>) -> Result<Reply, Failure> {
        self.connect().await?;
        encode(&mut self.out, &self.target.host, request);
        let stream = self.stream.as_mut().ok_or(Failure::Connect)?;
        stream.write_all(&self.out).await.map_err(|_| Failure::Io)?;
        loop {
            let eof = match frame(&self.buf)? {
                Framed::Complete(answer) => {
                    let mut whole = self.buf.split_to(answer.length).freeze();
                    let head = whole.split_to(answer.head);
                    let body = match answer.body {
                        Body::Within(start, end) => {
                            whole.slice(start - answer.head..end - answer.head)
                        }
                        Body::Decoded(body) => Bytes::from(body),
                    };
                    if answer.close {
                        self.stream = None;
                    }
                    return Ok(Reply {
                        status: answer.status,
                        head,
                        body,
                    });
                }
                Framed::Partial => {
                    stream
                        .read_buf(&mut self.buf)
                        .await
                        .map_err(|_| Failure::Io)?
                        == 0
                }
            };
            if eof {
                // A body that runs to the end of the connection.
                return match frame_at_eof(&self.buf)? {
                    Some(reply) => {
                        self.buf.clear();
                        self.stream = None;
                        Ok(reply)
                    }
                    None => Err(Failure::Io),
                };
            }
        }
    }
}

/// Written by hand, not formatted: the load generator's own cost per
/// request counts against the server it shares the cores with.
fn encode(out: &mut Vec<u8>, host: &str, request: &Request<'_>) {
    out.clear();
    for part in [
        request.method,
        " ",
        request.path,
        " HTTP/1.1\r\nhost: ",
        host,
        "\r\n",
    ] {
        out.extend_from_slice(part.as_bytes());
    }
    for (name, value) in request.headers {
        for part in [name, ": ", value, "\r\n"] {
            out.extend_from_slice(part.as_bytes());
        }
    }
    if !request.body.is_empty() || request.method != "GET" {
        out.extend_from_slice(b"content-length: ");
        out.extend_from_slice(itoa::Buffer::new().format(request.body.len()).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(request.body);
}

/// Poll `GET /healthz` until it answers 2xx, for at most `limit`.
pub async fn wait_ready(target: &Target, limit: Duration) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut conn = Conn::new(target.clone());
    loop {
        let answer = conn
            .send(&Request::get("/healthz"), Duration::from_secs(2))
            .await;
        if answer.is_ok_and(|reply| (200..300).contains(&reply.status)) {
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

    #[test]
    fn requests_carry_host_length_and_body() {
        let mut out = Vec::new();
        let headers = [("content-type", "application/json")];
        let request = Request {
            method: "POST",
            path: "/api/v1/orders",
            headers: &headers,
            body: b"{}",
        };
        encode(&mut out, "127.0.0.1:3000", &request);
        assert_eq!(
            out,
            b"POST /api/v1/orders HTTP/1.1\r\nhost: 127.0.0.1:3000\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
        );
        encode(&mut out, "h", &Request::get("/"));
        assert_eq!(out, b"GET / HTTP/1.1\r\nhost: h\r\n\r\n");
    }
}
