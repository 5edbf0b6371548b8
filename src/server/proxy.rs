//! The client's address behind a load balancer, learnt only from a
//! balancer we trust, so that every per-address limit (connections,
//! requests in flight, purchases, log-ins, waiting-room entries, holds,
//! presale code guesses) counts clients, not the balancer:
//!
//! - the PROXY protocol v2 (HAProxy's `send-proxy-v2`), on a listener that
//!   requires it (`--proxy-protocol`): the balancer states each
//!   connection's client before its first byte, so even the connection cap
//!   counts clients;
//! - `X-Forwarded-For`, from a peer in `--trusted-proxies` only, read right
//!   to left: the first address that is not a trusted proxy is the client.
//!   From any other peer the header is ignored, so a forged one changes
//!   nothing.

use std::{
    net::{IpAddr, SocketAddr},
    sync::Arc,
    time::Duration,
};

use http::HeaderMap;
use ipnet::IpNet;
use tokio::{io::AsyncReadExt as _, net::TcpStream};

/// How clients' addresses are learnt (`--proxy-protocol`,
/// `--trusted-proxies`); the default trusts nobody: the peer is the client.
#[derive(Debug, Clone, Default)]
pub struct ClientAddressing {
    /// Every connection starts with a PROXY v2 header.
    pub proxy_protocol: bool,
    /// Peers whose word about the client is taken.
    pub trusted: Arc<[IpNet]>,
}

/// The PROXY v2 signature.
const SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// The longest header accepted (addresses and a few TLVs; HAProxy sends
/// well under this).
const MAX_HEADER: usize = 536;

#[derive(Debug, thiserror::Error)]
pub enum ProxyHeaderError {
    #[error("no PROXY v2 header in time")]
    Timeout,
    #[error("reading the PROXY header: {0}")]
    Io(#[from] std::io::Error),
    #[error("not a PROXY v2 header")]
    NotProxy,
    #[error("a PROXY header of {0} bytes")]
    TooLong(usize),
    #[error("a malformed PROXY v2 header: {0}")]
    Malformed(String),
}

impl ClientAddressing {
    pub fn trusts(&self, peer: IpAddr) -> bool {
        let peer = canonical(peer);
        self.trusted.iter().any(|net| net.contains(&peer))
    }

    /// Read the PROXY v2 header that starts `stream` (within `within`):
    /// the client it names, or the peer itself for a `LOCAL` connection
    /// (the balancer's own health check) or an address family we do not
    /// serve. Exactly the header's bytes are read: the request follows.
    pub async fn read_proxy_header(
        stream: &mut TcpStream,
        peer: SocketAddr,
        within: Duration,
    ) -> Result<SocketAddr, ProxyHeaderError> {
        tokio::time::timeout(within, read_header(stream, peer))
            .await
            .map_err(|_| ProxyHeaderError::Timeout)?
    }

    /// The client of a request that came from `peer`: the peer itself,
    /// unless it is a trusted proxy and `X-Forwarded-For` names one.
    pub fn client_of(&self, peer: SocketAddr, headers: &HeaderMap) -> SocketAddr {
        if self.trusted.is_empty() || !self.trusts(peer.ip()) {
            return peer;
        }
        let hops: Vec<&str> = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .collect();
        let mut client = peer.ip();
        for hop in hops.iter().rev() {
            // A hop we cannot read ends the walk: what is left of it may
            // be anything the client wrote.
            let Some(ip) = parse_hop(hop) else { break };
            client = ip;
            if !self.trusts(ip) {
                break;
            }
        }
        SocketAddr::new(client, peer.port())
    }
}

/// An IPv4 address as an IPv6-mapped one is the IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// `203.0.113.7`, `2001:db8::1`, `[2001:db8::1]:443`, `203.0.113.7:443`.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    let hop = hop.trim();
    hop.parse::<IpAddr>()
        .or_else(|_| hop.parse::<SocketAddr>().map(|addr| addr.ip()))
        .ok()
        .map(canonical)
}

async fn read_header(
    stream: &mut TcpStream,
    peer: SocketAddr,
) -> Result<SocketAddr, ProxyHeaderError> {
    let mut fixed = [0_u8; 16];
    stream.read_exact(&mut fixed).await?;
    if fixed[..12] != SIGNATURE {
        return Err(ProxyHeaderError::NotProxy);
    }
    let rest = usize::from(u16::from_be_bytes([fixed[14], fixed[15]]));
    if 16 + rest > MAX_HEADER {
        return Err(ProxyHeaderError::TooLong(16 + rest));
    }
    let mut header = Vec::with_capacity(16 + rest);
    header.extend_from_slice(&fixed);
    header.resize(16 + rest, 0);
    stream.read_exact(&mut header[16..]).await?;
    client_in(&header, peer)
}

/// The client a complete header names.
fn client_in(header: &[u8], peer: SocketAddr) -> Result<SocketAddr, ProxyHeaderError> {
    use ppp::v2::{Addresses, Command, Header};
    let parsed =
        Header::try_from(header).map_err(|err| ProxyHeaderError::Malformed(err.to_string()))?;
    if parsed.command == Command::Local {
        return Ok(peer);
    }
    Ok(match parsed.addresses {
        Addresses::IPv4(v4) => SocketAddr::new(v4.source_address.into(), v4.source_port),
        Addresses::IPv6(v6) => SocketAddr::new(canonical(v6.source_address.into()), v6.source_port),
        // A Unix socket's or an unknown family's client has no address of
        // its own: the balancer's stands for it.
        Addresses::Unix(_) | Addresses::Unspecified => peer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addressing(trusted: &[&str]) -> ClientAddressing {
        ClientAddressing {
            proxy_protocol: false,
            trusted: trusted.iter().map(|net| net.parse().unwrap()).collect(),
        }
    }

    fn forwarded(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append("x-forwarded-for", value.parse().unwrap());
        }
        headers
    }

    #[test]
    fn forwarded_for_counts_only_from_a_trusted_peer_read_right_to_left() {
        let trust = addressing(&["10.0.0.0/8", "127.0.0.1/32"]);
        let proxy: SocketAddr = "10.0.0.5:4000".parse().unwrap();
        let ip = |raw: &str| raw.parse::<IpAddr>().unwrap();
        // The client the balancer saw; what the client wrote before it is
        // ignored.
        let headers = forwarded(&["6.6.6.6, 203.0.113.7"]);
        assert_eq!(trust.client_of(proxy, &headers).ip(), ip("203.0.113.7"));
        // Two proxies of ours: the first untrusted hop.
        let headers = forwarded(&["6.6.6.6", "203.0.113.7, 10.0.0.9"]);
        assert_eq!(trust.client_of(proxy, &headers).ip(), ip("203.0.113.7"));
        // From a peer we do not trust, the header is nothing.
        let stranger: SocketAddr = "198.51.100.1:5000".parse().unwrap();
        assert_eq!(trust.client_of(stranger, &headers), stranger);
        // No header, or garbage at the right: the proxy itself.
        assert_eq!(trust.client_of(proxy, &HeaderMap::new()), proxy);
        assert_eq!(
            trust.client_of(proxy, &forwarded(&["1.2.3.4, junk"])),
            proxy
        );
        // Ports and brackets, and an IPv4-mapped address.
        let headers = forwarded(&["[2001:db8::1]:443"]);
        assert_eq!(trust.client_of(proxy, &headers).ip(), ip("2001:db8::1"));
        let headers = forwarded(&["::ffff:203.0.113.7"]);
        assert_eq!(trust.client_of(proxy, &headers).ip(), ip("203.0.113.7"));
        // Trusting nobody (the default): the peer, always.
        assert_eq!(addressing(&[]).client_of(proxy, &headers), proxy);
    }

    fn v2_header(command: u8, family: u8, addresses: &[u8]) -> Vec<u8> {
        let mut header = SIGNATURE.to_vec();
        header.push(0x20 | command);
        header.push(family);
        header.extend_from_slice(&(addresses.len() as u16).to_be_bytes());
        header.extend_from_slice(addresses);
        header
    }

    #[test]
    fn a_proxy_header_names_the_client_or_stands_for_the_balancer() {
        let peer: SocketAddr = "127.0.0.1:9000".parse().unwrap();
        // PROXY, TCP over IPv4: 127.0.0.2:50000 -> 127.0.0.1:3000.
        let addresses = [127, 0, 0, 2, 127, 0, 0, 1, 0xC3, 0x50, 0x0B, 0xB8];
        let header = v2_header(1, 0x11, &addresses);
        assert_eq!(
            client_in(&header, peer).unwrap(),
            "127.0.0.2:50000".parse().unwrap()
        );
        // LOCAL: the balancer's own health check.
        let header = v2_header(0, 0x00, &[]);
        assert_eq!(client_in(&header, peer).unwrap(), peer);
        // Truncated addresses.
        let header = v2_header(1, 0x11, &addresses[..6]);
        assert!(client_in(&header, peer).is_err());
    }
}
