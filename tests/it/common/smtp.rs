//! A real SMTP server on loopback that keeps what it is sent: the tests'
//! mailbox. It speaks enough of RFC 5321 for a client that sends no
//! STARTTLS (lettre with an `smtp://` URL): greeting, EHLO/HELO, MAIL,
//! RCPT, DATA (dot-unstuffed), RSET, NOOP, QUIT.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    net::{TcpListener, TcpStream},
    task::JoinHandle,
};

/// One message as delivered.
#[derive(Debug, Clone)]
pub struct Mail {
    pub from: String,
    pub to: Vec<String>,
    /// Headers and body, as sent (CRLF line ends, dots unstuffed).
    pub data: String,
}

impl Mail {
    /// The first line of the body that starts with `prefix`, trimmed.
    pub fn line_starting(&self, prefix: &str) -> Option<String> {
        self.data
            .lines()
            .map(str::trim)
            .find(|line| line.starts_with(prefix))
            .map(str::to_owned)
    }

    pub fn header(&self, name: &str) -> Option<String> {
        let head = self.data.split("\r\n\r\n").next()?;
        head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    }
}

pub struct Sink {
    pub addr: SocketAddr,
    mails: Arc<Mutex<Vec<Mail>>>,
    task: JoinHandle<()>,
}

/// Recipients starting with this are refused for good (550), as a server
/// refuses a mailbox that does not exist.
pub const REFUSED: &str = "nobody";

impl Sink {
    pub async fn start() -> Self {
        Self::start_slow(Duration::ZERO).await
    }

    /// A sink that takes `per_mail` to accept each mail, as a real server
    /// does (its disk, its checks).
    pub async fn start_slow(per_mail: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mails = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&mails);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                // Replies go out at once, as a real server's do (no 40 ms
                // Nagle and delayed-ACK stall per exchange on loopback).
                let _ = stream.set_nodelay(true);
                tokio::spawn(session(stream, Arc::clone(&kept), per_mail));
            }
        });
        Self { addr, mails, task }
    }

    /// `smtp://127.0.0.1:port`, for `--smtp-url`.
    pub fn url(&self) -> String {
        format!("smtp://{}", self.addr)
    }

    pub fn mails(&self) -> Vec<Mail> {
        self.mails.lock().unwrap().clone()
    }

    /// Wait (up to `within`) for the first mail that `wanted` picks.
    pub async fn wait_for_mail(&self, within: Duration, wanted: impl Fn(&Mail) -> bool) -> Mail {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(mail) = self.mails().into_iter().find(&wanted) {
                return mail;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no such mail within {within:?} among {:?}",
                self.mails()
                    .iter()
                    .map(|m| m.header("Subject"))
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Wait (up to `within`) until at least `count` mails have arrived.
    pub async fn wait_for(&self, count: usize, within: Duration) -> Vec<Mail> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let mails = self.mails();
            if mails.len() >= count || tokio::time::Instant::now() >= deadline {
                return mails;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn session(stream: TcpStream, mails: Arc<Mutex<Vec<Mail>>>, per_mail: Duration) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read);
    let _ = write.write_all(b"220 test-sink ESMTP\r\n").await;
    let (mut from, mut to) = (String::new(), Vec::new());
    let mut line = String::new();
    loop {
        line.clear();
        if lines.read_line(&mut line).await.unwrap_or(0) == 0 {
            return;
        }
        let command = line.trim_end().to_owned();
        let verb = command
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_ascii_uppercase();
        let reply: &[u8] = match verb.as_str() {
            "EHLO" => b"250-test-sink\r\n250 8BITMIME\r\n",
            "HELO" | "NOOP" => b"250 ok\r\n",
            "MAIL" => {
                from = address(&command);
                b"250 ok\r\n"
            }
            "RCPT" if address(&command).starts_with(REFUSED) => b"550 no such mailbox\r\n",
            "RCPT" => {
                to.push(address(&command));
                b"250 ok\r\n"
            }
            "RSET" => {
                (from, to) = (String::new(), Vec::new());
                b"250 ok\r\n"
            }
            "DATA" => {
                let _ = write.write_all(b"354 end with <CRLF>.<CRLF>\r\n").await;
                let mut data = String::new();
                loop {
                    line.clear();
                    if lines.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    if line == ".\r\n" {
                        break;
                    }
                    data.push_str(line.strip_prefix('.').unwrap_or(&line));
                }
                tokio::time::sleep(per_mail).await;
                mails.lock().unwrap().push(Mail {
                    from: std::mem::take(&mut from),
                    to: std::mem::take(&mut to),
                    data,
                });
                b"250 queued\r\n"
            }
            "QUIT" => {
                let _ = write.write_all(b"221 bye\r\n").await;
                return;
            }
            _ => b"502 not implemented\r\n",
        };
        if write.write_all(reply).await.is_err() {
            return;
        }
    }
}

/// `<a@b>` from `MAIL FROM:<a@b>` or `RCPT TO:<a@b>`.
fn address(command: &str) -> String {
    command
        .split_once('<')
        .and_then(|(_, rest)| rest.split_once('>'))
        .map(|(addr, _)| addr.to_owned())
        .unwrap_or_default()
}

/// The public address the mailed links of [`app_and_mailer`] start with.
pub const PUBLIC: &str = "http://tickets.test";

/// The app (with its confirmation key and [`PUBLIC`] address) and a mailer
/// to the sink, or without SMTP (`None`: the links are logged).
pub async fn app_and_mailer(
    pool: &sqlx::PgPool,
    sink: Option<&Sink>,
) -> (super::TestApp, JoinHandle<()>) {
    let key = stampede::domain::ConfirmKey::random();
    let clock = stampede::clock::ManualClock::new(super::now());
    let state = stampede::web::AppState::new(pool.clone())
        .with_clock(clock.clone())
        .with_confirm_key(key.clone())
        .with_site(PUBLIC, stampede::domain::Zone::utc());
    let app = super::TestApp::spawn_state(pool.clone(), clock, state).await;
    let settings = stampede::mail::MailSettings::new(
        sink.map(Sink::url),
        "Stampede <tickets@example.org>",
        PUBLIC,
    )
    .unwrap();
    (
        app,
        stampede::mail::spawn(pool.clone(), key, settings).unwrap(),
    )
}
