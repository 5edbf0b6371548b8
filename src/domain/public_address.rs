//! Which addresses a webhook delivery may connect to: an address in none of
//! IANA's special-purpose blocks, nor multicast or reserved space. One table
//! per family, row for row from the registries (as of 2025-06):
//! <https://www.iana.org/assignments/iana-ipv4-special-registry/>
//! <https://www.iana.org/assignments/iana-ipv6-special-registry/>
//!
//! Every block is refused, also the few the registry marks globally
//! reachable (AS112, AMT, the anycast services): none of them is a
//! webhook receiver. The translation blocks (NAT64, 6to4, Teredo,
//! IPv4-mapped) are refused whole rather than followed to the IPv4 address
//! inside: a relay may lead anywhere.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// IPv4: (network, prefix length, name).
const IPV4_SPECIAL: [(Ipv4Addr, u8, &str); 19] = [
    (Ipv4Addr::new(0, 0, 0, 0), 8, "this network"),
    (Ipv4Addr::new(10, 0, 0, 0), 8, "private use"),
    (Ipv4Addr::new(100, 64, 0, 0), 10, "shared address space"),
    (Ipv4Addr::new(127, 0, 0, 0), 8, "loopback"),
    (Ipv4Addr::new(169, 254, 0, 0), 16, "link local"),
    (Ipv4Addr::new(172, 16, 0, 0), 12, "private use"),
    (Ipv4Addr::new(192, 0, 0, 0), 24, "IETF protocol assignments"),
    (
        Ipv4Addr::new(192, 0, 2, 0),
        24,
        "documentation (TEST-NET-1)",
    ),
    (Ipv4Addr::new(192, 31, 196, 0), 24, "AS112-v4"),
    (Ipv4Addr::new(192, 52, 193, 0), 24, "AMT"),
    (
        Ipv4Addr::new(192, 88, 99, 0),
        24,
        "deprecated 6to4 relay anycast",
    ),
    (Ipv4Addr::new(192, 168, 0, 0), 16, "private use"),
    (
        Ipv4Addr::new(192, 175, 48, 0),
        24,
        "direct delegation AS112",
    ),
    (Ipv4Addr::new(198, 18, 0, 0), 15, "benchmarking"),
    (
        Ipv4Addr::new(198, 51, 100, 0),
        24,
        "documentation (TEST-NET-2)",
    ),
    (
        Ipv4Addr::new(203, 0, 113, 0),
        24,
        "documentation (TEST-NET-3)",
    ),
    (Ipv4Addr::new(240, 0, 0, 0), 4, "reserved"),
    (Ipv4Addr::new(255, 255, 255, 255), 32, "limited broadcast"),
    // Not in the special-purpose registry, in the multicast one.
    (Ipv4Addr::new(224, 0, 0, 0), 4, "multicast"),
];

/// IPv6 inside global unicast (2000::/3): (network, prefix length, name).
/// Everything outside 2000::/3 is refused before this table: loopback,
/// unspecified, IPv4-mapped and -compatible (::/8), NAT64 (64:ff9b::/96,
/// 64:ff9b:1::/48), discard-only and dummy (100::/64, 100:0:0:1::/64),
/// ULA (fc00::/7), link local (fe80::/10), site local, multicast (ff00::/8).
const IPV6_SPECIAL: [(Ipv6Addr, u8, &str); 7] = [
    (
        Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0),
        23,
        "IETF protocol assignments (Teredo, benchmarking, ORCHID, anycast)",
    ),
    (
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0),
        32,
        "documentation",
    ),
    (Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16, "6to4"),
    (
        Ipv6Addr::new(0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0),
        48,
        "direct delegation AS112",
    ),
    (
        Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0),
        20,
        "documentation",
    ),
    (
        Ipv6Addr::new(0x5f00, 0, 0, 0, 0, 0, 0, 0),
        16,
        "segment routing SIDs",
    ),
    // Outside 2000::/3 (refused anyway); listed because the registry has it.
    (
        Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0),
        48,
        "local-use NAT64",
    ),
];

/// Whether a delivery may connect to `ip`.
pub fn is_public(ip: IpAddr) -> bool {
    special_purpose(ip).is_none()
}

/// The special-purpose block `ip` falls in, by its registry name.
fn special_purpose(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(ip) => IPV4_SPECIAL
            .iter()
            .find(|(net, len, _)| in_block(u32::from(ip).into(), u32::from(*net).into(), *len, 32))
            .map(|(_, _, name)| *name),
        IpAddr::V6(ip) => {
            // Global unicast is 2000::/3; the rest is special or unassigned.
            if ip.segments()[0] & 0xe000 != 0x2000 {
                return Some("outside global unicast (2000::/3)");
            }
            IPV6_SPECIAL
                .iter()
                .find(|(net, len, _)| in_block(u128::from(ip), u128::from(*net), *len, 128))
                .map(|(_, _, name)| *name)
        }
    }
}

/// Whether `addr` lies in `net`/`len`, both `bits` wide (held in a u128).
fn in_block(addr: u128, net: u128, len: u8, bits: u32) -> bool {
    let len = u32::from(len);
    if len == 0 {
        return true;
    }
    let shift = bits - len;
    (addr >> shift) == (net >> shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn public(ip: &str) -> bool {
        is_public(ip.parse().unwrap())
    }

    #[test]
    fn every_block_of_the_registries_is_refused_at_its_edges() {
        for (net, len, name) in IPV4_SPECIAL {
            let first = u32::from(net);
            let last = first | (u32::MAX.checked_shr(u32::from(len)).unwrap_or(0));
            for ip in [first, last] {
                let ip = IpAddr::V4(Ipv4Addr::from(ip));
                assert!(!is_public(ip), "{ip} ({name})");
            }
        }
        for (net, len, name) in IPV6_SPECIAL {
            let first = u128::from(net);
            let last = first | (u128::MAX.checked_shr(u32::from(len)).unwrap_or(0));
            for ip in [first, last] {
                let ip = IpAddr::V6(Ipv6Addr::from(ip));
                assert!(!is_public(ip), "{ip} ({name})");
            }
        }
    }

    #[test]
    fn the_addresses_the_attack_used_are_refused() {
        for ip in [
            "64:ff9b::808:808",
            "64:ff9b::7f00:1",
            "64:ff9b:1::a00:1",
            "2002:7f00:1::1",
            "2002:808:808::1",
            "::ffff:0:0",
            "::ffff:8.8.8.8",
            "::ffff:127.0.0.1",
            "::127.0.0.1",
            "198.18.0.1",
            "198.19.255.255",
            "192.0.0.1",
            "192.0.0.170",
            "2001::1",
            "2001:db8::1",
            "3fff::1",
            "100::1",
            "::1",
            "::",
            "fc00::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "127.0.0.1",
            "10.1.2.3",
            "172.31.255.255",
            "192.168.0.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
        ] {
            assert!(!public(ip), "{ip}");
        }
    }

    #[test]
    fn ordinary_addresses_next_to_the_blocks_are_public() {
        for ip in [
            "93.184.216.34",
            "8.8.8.8",
            "9.255.255.255",
            "11.0.0.0",
            "100.63.255.255",
            "100.128.0.1",
            "172.32.0.0",
            "192.0.1.0",
            "198.17.255.255",
            "198.20.0.0",
            "223.255.255.255",
            "2606:4700::1111",
            "2001:200::1",
            "2003::1",
            "2a00:1450:4001::200e",
        ] {
            assert!(public(ip), "{ip}");
        }
    }
}
