//! Webhook endpoints' input: the URL (and which addresses a delivery may
//! reach), the event types wanted, the description; the signing secret's
//! form; the retry schedule. No I/O: the DNS look-up is `webhooks::address`.

use std::{net::IpAddr, time::Duration};

use url::{Host, Url};

use super::{InvalidField, Lines, is_public, refuse_control};

/// The outbox's message types (migrations/0008_outbox.sql, 0016_holds.sql,
/// 0024_payments.sql), the ones an endpoint can ask for.
pub const WEBHOOK_EVENT_TYPES: [&str; 9] = [
    "order.created",
    "order.confirmed",
    "order.expired",
    "order.cancelled",
    "event.cancelled",
    "ticket_type.sold_out",
    "ticket_type.available_again",
    "order.paid",
    "order.refunded",
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
        let mut url = Url::parse(raw)
            .map_err(|_| invalid("Enter an absolute URL, such as https://example.com/hooks."))?;
        // `vm.` and `vm` name the same host; keep the bare form, so the
        // checks below and the resolver's see one name.
        if let Some(Host::Domain(name)) = url.host()
            && name.ends_with('.')
        {
            let bare = name.trim_end_matches('.').to_owned();
            if bare.is_empty() {
                return Err(invalid("The URL needs a host."));
            }
            url.set_host(Some(&bare))
                .map_err(|_| invalid("The URL needs a host."))?;
        }
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
                    let name = name.to_ascii_lowercase();
                    name == "localhost" || name.ends_with(".localhost")
                }
            };
            if refused {
                return Err(invalid(
                    "The URL points at a loopback, private or reserved address; deliveries go to public addresses only.",
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
    fn a_trailing_dot_is_dropped_before_the_checks() {
        for bad in [
            "https://localhost./x",
            "https://api.localhost./x",
            "https://127.0.0.1./x",
            "https://./x",
        ] {
            assert!(WebhookUrl::parse(bad, false).is_err(), "{bad}");
        }
        let url = WebhookUrl::parse("https://hooks.example.com./in", false).unwrap();
        assert_eq!(url.as_str(), "https://hooks.example.com/in");
    }

    #[test]
    fn special_purpose_literals_are_refused() {
        for bad in [
            "https://[64:ff9b::808:808]/",
            "https://[64:ff9b:1::1]/",
            "https://[2002:7f00:1::1]/",
            "https://[::ffff:0:0]/",
            "https://198.18.0.1/",
            "https://192.0.0.8/",
        ] {
            assert!(WebhookUrl::parse(bad, false).is_err(), "{bad}");
        }
    }

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
