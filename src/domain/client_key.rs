//! Whom a per-address limit applies to.

use std::{
    fmt,
    net::{IpAddr, Ipv6Addr},
};

/// Whom a per-client cap applies to: an IPv4 address, or an IPv6 /64 (one
/// subscriber's usual allocation, so a single host cannot walk past the
/// cap by changing the low bits of its address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientKey(IpAddr);

impl ClientKey {
    pub fn of(ip: IpAddr) -> Self {
        Self(match ip.to_canonical() {
            IpAddr::V4(v4) => IpAddr::V4(v4),
            IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & (u128::MAX << 64))),
        })
    }
}

/// `192.0.2.7`, or the /64's first address (`2001:db8:1:2::`): what an
/// order held for an unproven mailbox keeps as `held_by_address`.
impl fmt::Display for ClientKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_slash_64_is_one_key_written_as_its_first_address() {
        let key = |s: &str| ClientKey::of(s.parse().unwrap());
        assert_eq!(key("2001:db8:1:2::1").to_string(), "2001:db8:1:2::");
        assert_eq!(key("2001:db8:1:2:ffff::9"), key("2001:db8:1:2::1"));
        assert_eq!(key("::ffff:192.0.2.7").to_string(), "192.0.2.7");
    }
}
