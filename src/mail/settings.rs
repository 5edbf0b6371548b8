//! How the mailer runs: its settings, checked when the server starts.

use std::time::Duration;

use lettre::message::Mailbox;

/// How the mailer runs (`stampede serve --smtp-url ... --public-url ...`).
#[derive(Debug, Clone)]
pub struct MailSettings {
    /// `smtp://host:port` (plain, or `?tls=required` for STARTTLS),
    /// `smtps://` (TLS), with
    /// optional `user:password@`; `None` logs the links instead (development).
    pub smtp_url: Option<String>,
    pub from: Mailbox,
    /// Where buyers reach the site, e.g. `https://tickets.example.org`: the
    /// links in the mails start with it.
    pub public_url: String,
    pub poll: Duration,
    pub batch: i64,
    /// Mails in flight at once.
    pub concurrency: usize,
    pub backoff_max: Duration,
}

impl MailSettings {
    pub fn new(smtp_url: Option<String>, from: &str, public_url: &str) -> Result<Self, String> {
        let from = from
            .parse::<Mailbox>()
            .map_err(|err| format!("--mail-from is not a mail address: {err}"))?;
        let public_url = public_url.trim_end_matches('/').to_owned();
        let parsed = url::Url::parse(&public_url).map_err(|err| format!("--public-url: {err}"))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
            return Err("--public-url must be an http or https address".to_owned());
        }
        Ok(Self {
            smtp_url,
            from,
            public_url,
            poll: Duration::from_millis(200),
            // A round holds the cursor's row lock (so a transaction id) while
            // it sends, which holds back the outbox horizon that the other
            // consumers read below: small rounds keep that short (64 mails,
            // 8 at a time, at 20 ms per mail: about 160 ms).
            batch: 64,
            concurrency: 8,
            backoff_max: Duration::from_secs(30),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_refuse_a_bad_sender_or_public_address() {
        assert!(MailSettings::new(None, "not an address", "http://x.test").is_err());
        for url in ["ftp://x.test", "x.test", "http://"] {
            assert!(MailSettings::new(None, "a@b.test", url).is_err(), "{url}");
        }
        let ok = MailSettings::new(None, "Tickets <a@b.test>", "https://x.test/").unwrap();
        assert_eq!(ok.public_url, "https://x.test");
    }
}
