//! Webhook endpoints' input: the URL (and which addresses a delivery may
//! reach), the event types wanted, the description; the signing secret's
//! form; the retry schedule. No I/O: the DNS look-up is `webhooks::address`.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    time::Duration,
};

use url::{Host, Url};

use super::{InvalidField, Lines, refuse_control};

/// The outbox's message types (migrations/0008_outbox.sql, 0016_holds.sql),
/// the ones an endpoint can ask for.
pub const WEBHOOK_EVENT_TYPES: [&str; 7] = [
    "order.created",
    "order.confirmed",
    "order.expired",
    "order.cancelled",
    "event.cancelled",
    "ticket_type.sold_out",
    "ticket_type.available_again",
];

pub const MAX_WEBHOOK_URL_CHARS: usize = 2048;
pub const MAX_WEBHOOK_DESCRIPTION_CHARS: usize = 200;
/// Endpoints one organizer may have.
pub const MAX_WEBHOOK_ENDPOINTS: i64 = 20;

/// A webhook URL: absolute https (http only with `allow_private`, for
/// tests and private networks), a host, no user or password, no fragment;
/// an IP literal must be one a delivery may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookUrl(Url);

impl WebhookUrl {
    pub fn parse(raw: &str, allow_private: bool) -> Result<Self, InvalidField> {
        let invalid = |message: &str| InvalidField::new("url", message);
        let raw = raw.trim();
        if raw.is_empty() {
            return Err(invalid("Enter the URL to send events to."));
        }
        if raw.chars().count() > MAX_WEBHOOK_URL_CHARS {
            return Err(invalid("The URL is too long (at most 2048 characters)."));
        }
        let url = Url::parse(raw)
            .map_err(|_| invalid("Enter an absolute URL, such as https://example.com/hooks."))?;
        match url.scheme() {
            "https" => {}
            "http" if allow_private => {}
            "http" => return Err(invalid("The URL must use https.")),
            _ => return Err(invalid("The URL must start with https://.")),
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(invalid(
                "Remove the user name and password from the URL; deliveries are signed instead.",
            ));
        }
        if url.fragment().is_some() {
            return Err(invalid("Remove the #fragment from the URL."));
        }
        let host = url.host().ok_or_else(|| invalid("The URL needs a host."))?;
        if !allow_private {
            let refused = match host {
                Host::Ipv4(ip) => !is_public(IpAddr::V4(ip)),
                Host::Ipv6(ip) => !is_public(IpAddr::V6(ip)),
                Host::Domain(name) => {
                    let name = name.trim_end_matches('.').to_ascii_lowercase();
                    name == "localhost" || name.ends_with(".localhost")
                }
            };
            if refused {
                return Err(invalid(
                    "The URL points at a loopback, private or link-local address; deliveries go to public addresses only.",
                ));
            }
        }
        Ok(Self(url))
    }

    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    pub fn url(&self) -> &Url {
        &self.0
    }
}

/// Whether a delivery may connect to `ip`: not loopback, private (RFC 1918,
/// ULA fc00::/7), link-local, unspecified, multicast, broadcast, CGNAT
/// (100.64.0.0/10), "this network" (0.0.0.0/8), nor any of these inside an
/// IPv4-mapped or IPv4-compatible IPv6 address.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(ip) => is_public_v4(ip),
        IpAddr::V6(ip) => {
            if let Some(v4) = ip.to_ipv4_mapped() {
                return is_public_v4(v4);
            }
            let segments = ip.segments();
            // ::a.b.c.d (deprecated IPv4-compatible) and 64:ff9b::/96 (NAT64)
            // lead to the IPv4 address inside.
            let embedded = Ipv4Addr::new(
                (segments[6] >> 8) as u8,
                segments[6] as u8,
                (segments[7] >> 8) as u8,
                segments[7] as u8,
            );
            if segments[..6] == [0; 6] && !ip.is_loopback() && !ip.is_unspecified() {
                return is_public_v4(embedded);
            }
            if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                return is_public_v4(embedded);
            }
            !(ip.is_loopback()
                || ip.is_unspecified()
                || ip.is_multicast()
                || (segments[0] & 0xfe00) == 0xfc00
                || (segments[0] & 0xffc0) == 0xfe80
                || (segments[0] & 0xffc0) == 0xfec0
                || is_documentation_v6(ip))
        }
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_multicast()
        || ip.is_broadcast()
        || a == 0
        || (a == 100 && (b & 0xc0) == 64)
        || a >= 240)
}

fn is_documentation_v6(ip: Ipv6Addr) -> bool {
    let segments = ip.segments();
    segments[0] == 0x2001 && segments[1] == 0x0db8
}

/// The event types an endpoint wants: at least one, each known, no repeats
/// (kept in the canonical order).
pub fn parse_event_types<S: AsRef<str>>(raw: &[S]) -> Result<Vec<String>, InvalidField> {
    let invalid = |message: String| InvalidField::new("event_types", message);
    if raw.is_empty() {
        return Err(invalid("Choose at least one event type.".to_owned()));
    }
    for kind in raw {
        let kind = kind.as_ref();
        if !WEBHOOK_EVENT_TYPES.contains(&kind) {
            return Err(invalid(format!(
                "Unknown event type {kind:?}; choose from {}.",
                WEBHOOK_EVENT_TYPES.join(", ")
            )));
        }
    }
    Ok(WEBHOOK_EVENT_TYPES
        .iter()
        .filter(|known| raw.iter().any(|kind| kind.as_ref() == **known))
        .map(|known| (*known).to_owned())
        .collect())
}

/// An optional note for the organizer: one line, 200 characters at most.
pub fn parse_webhook_description(raw: &str) -> Result<String, InvalidField> {
    let raw = raw.trim();
    refuse_control(raw, Lines::One).map_err(|message| InvalidField::new("description", message))?;
    if raw.chars().count() > MAX_WEBHOOK_DESCRIPTION_CHARS {
        return Err(InvalidField::new(
            "description",
            "The description is too long (at most 200 characters).",
        ));
    }
    Ok(raw.to_owned())
}

/// The retry schedule, relative to its base (5 s by default): the nominal
/// delay before retry n is 5 s, 5 min, 30 min, 2 h, 5 h, then 10 h each;
/// retries stop 3 days after the first attempt. Multiples of the base, so
/// a test can run the whole shape in milliseconds.
const SCHEDULE: [u32; 6] = [1, 60, 360, 1440, 3600, 7200];
/// 3 days in units of the 5 s base.
const WINDOW: u32 = 51_840;

#[derive(Debug, Clone, Copy)]
pub struct RetrySchedule {
    pub base: Duration,
}

impl Default for RetrySchedule {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(5),
        }
    }
}

impl RetrySchedule {
    /// The nominal delay after the `failures`-th failed attempt (1-based).
    pub fn nominal(&self, failures: u32) -> Duration {
        let step = SCHEDULE[(failures.max(1) as usize - 1).min(SCHEDULE.len() - 1)];
        self.base * step
    }

    /// The delay before the next attempt, after `failures` failed ones:
    /// full jitter between the previous step and this one, uniform in
    /// [nominal(n-1), nominal(n)] (from 0 for the first), so a crowd of
    /// failing deliveries spreads out and the gaps still grow. `unit` is a
    /// random number in [0, 1].
    pub fn delay(&self, failures: u32, unit: f64) -> Duration {
        let high = self.nominal(failures);
        let low = if failures <= 1 {
            Duration::ZERO
        } else {
            self.nominal(failures - 1)
        };
        low + (high - low).mul_f64(unit.clamp(0.0, 1.0))
    }

    /// How long after the first attempt retries go on.
    pub fn window(&self) -> Duration {
        self.base * WINDOW
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_https_with_a_host_and_no_credentials() {
        assert!(WebhookUrl::parse("https://example.com/hooks?x=1", false).is_ok());
        for bad in [
            "",
            "example.com/hooks",
            "http://example.com/hooks",
            "ftp://example.com/",
            "https://user:pw@example.com/",
            "https://example.com/#frag",
            "https://127.0.0.1/",
            "https://localhost:8080/",
            "https://[::1]/",
            "https://[::ffff:10.0.0.1]/",
            "https://169.254.169.254/latest/meta-data",
            "https://100.64.0.1/",
            "https://192.168.1.10/",
        ] {
            let err = WebhookUrl::parse(bad, false).err();
            assert_eq!(err.map(|e| e.field), Some("url".to_owned()), "{bad}");
        }
        assert!(WebhookUrl::parse("http://127.0.0.1:9/x", true).is_ok());
    }

    #[test]
    fn public_addresses_only() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.0.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "100.127.255.255",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:192.168.0.1",
            "::127.0.0.1",
            "64:ff9b::10.0.0.1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "93.184.216.34",
            "100.128.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn event_types_are_known_and_canonical() {
        assert_eq!(
            parse_event_types(&["order.cancelled", "order.created", "order.created"]).unwrap(),
            vec!["order.created", "order.cancelled"]
        );
        assert!(parse_event_types::<&str>(&[]).is_err());
        assert!(parse_event_types(&["order.updated"]).is_err());
    }

    #[test]
    fn retry_gaps_grow_within_their_steps() {
        let schedule = RetrySchedule::default();
        assert_eq!(schedule.nominal(1), Duration::from_secs(5));
        assert_eq!(schedule.nominal(2), Duration::from_secs(300));
        assert_eq!(schedule.nominal(6), Duration::from_secs(36_000));
        assert_eq!(schedule.nominal(60), Duration::from_secs(36_000));
        assert_eq!(schedule.window(), Duration::from_secs(3 * 24 * 3600));
        assert_eq!(schedule.delay(1, 0.0), Duration::ZERO);
        assert_eq!(schedule.delay(2, 0.0), Duration::from_secs(5));
        assert_eq!(schedule.delay(2, 1.0), Duration::from_secs(300));
        assert_eq!(schedule.delay(3, 0.5), Duration::from_secs(1_050));
    }
}
