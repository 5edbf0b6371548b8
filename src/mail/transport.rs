//! Where the mails go: an SMTP server, or the log (development); and the
//! one way a mail is handed over.

use std::time::Duration;

use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use super::{MailSettings, RoundError, order_mail::MailBuildError};

/// Where the mails go.
pub(super) enum Transport {
    Smtp(AsyncSmtpTransport<Tokio1Executor>),
    /// No SMTP configured: the link is logged.
    Log,
}

impl Transport {
    pub(super) fn new(settings: &MailSettings) -> Result<Self, String> {
        match &settings.smtp_url {
            None => Ok(Self::Log),
            Some(url) => AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
                // The URL itself is never echoed: it may hold a password.
                .map_err(|err| format!("--smtp-url is not a usable SMTP URL: {err}"))
                .map(|builder| Self::Smtp(builder.timeout(Some(Duration::from_secs(10))).build())),
        }
    }
}

/// Build a message (off the async threads: a ticket mail renders a PDF and
/// QR codes) and hand it to the transport. `Ok(true)` once the server (or
/// the log) took it; `Ok(false)` when nothing can reach the address: the
/// server refused this mailbox for good (counted, logged: trying again
/// cannot help), the mail library refuses it, or the mail could not be made
/// (its documents). An error (the server's) stops the round, to be tried
/// again.
pub(super) async fn deliver(
    transport: &Transport,
    id: uuid::Uuid,
    recipient: &str,
    build: impl FnOnce() -> Result<Option<Message>, MailBuildError> + Send + 'static,
) -> Result<bool, RoundError> {
    let smtp = match transport {
        Transport::Log => {
            tracing::info!(%id, recipient, "a mail (no SMTP configured: logged, not sent)");
            return Ok(true);
        }
        Transport::Smtp(smtp) => smtp,
    };
    let built = tokio::task::spawn_blocking(build)
        .await
        .map_err(|err| err.to_string())
        .and_then(|built| built.map_err(|err| err.to_string()));
    let message = match built {
        Ok(Some(message)) => message,
        // An address our parser took but the mail library does not:
        // nothing can reach it.
        Ok(None) => {
            tracing::warn!(%id, "cannot mail this address");
            return Ok(false);
        }
        // The same order would fail the same way again: counted, logged
        // and skipped, so that it holds up nobody else's mail.
        Err(err) => {
            metrics::counter!("stampede_mails_unbuildable_total").increment(1);
            tracing::error!(%id, error = %err, "could not make this mail; skipped");
            return Ok(false);
        }
    };
    match smtp.send(message).await {
        Ok(_) => Ok(true),
        // The server refuses this recipient for good (550, 551, 553: no
        // such mailbox, not here, a name not allowed): trying again cannot
        // help, and must not hold up everyone else's mail. Any other
        // refusal (a failed log-in, a quota, TLS required) is the server's
        // or ours: the round stops and is tried again later.
        Err(err) if refuses_the_mailbox(&err) => {
            metrics::counter!("stampede_mails_refused_total").increment(1);
            tracing::warn!(%id, error = %err, "the SMTP server refused this mail for good; skipped");
            Ok(false)
        }
        Err(err) => Err(RoundError::Smtp(err.to_string())),
    }
}

/// A permanent refusal of the recipient's mailbox itself (RFC 5321 550,
/// 551, 553), as opposed to one of the whole server.
fn refuses_the_mailbox(err: &lettre::transport::smtp::Error) -> bool {
    err.is_permanent()
        && err
            .status()
            .is_some_and(|code| matches!(code.to_string().as_str(), "550" | "551" | "553"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_smtp_url_is_refused_without_showing_its_password() {
        let settings = MailSettings::new(
            Some("http://user:hunter2@x".into()),
            "a@b.test",
            "http://x.test",
        )
        .unwrap();
        let refused = Transport::new(&settings).err().unwrap_or_default();
        assert!(
            refused.starts_with("--smtp-url") && !refused.contains("hunter2"),
            "{refused}"
        );
    }
}
