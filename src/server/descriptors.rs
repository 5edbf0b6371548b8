//! File descriptors: raise the limit at start, and keep serving when they
//! run out anyway.

use std::{fs::File, io, time::Duration};

use tokio::{
    io::AsyncWriteExt as _,
    net::{TcpListener, TcpStream},
};

/// How long the accept loop pauses after an accept error, so that it
/// neither spins nor dies while descriptors are short.
const BACKOFF: Duration = Duration::from_millis(20);

/// Raise the soft limit on open files to the hard limit: every connection
/// is a descriptor, and the usual soft default (1,024) is far too few.
pub fn raise_limit() {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => tracing::info!(limit, "open file limit"),
        Err(err) => tracing::warn!(%err, "cannot raise the open file limit"),
    }
}

/// A plain 503 for a connection refused before any request was read.
pub(super) async fn refuse(mut stream: TcpStream, reason: &str) {
    let body = format!("{reason}\n");
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\nconnection: close\r\n\
         content-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    // Never wait on a refused client: whatever the socket takes at once.
    let _ = stream.try_write(response.as_bytes());
    let _ = stream.shutdown().await;
}

/// What the accept loop does with an accept error.
#[derive(Debug)]
pub(super) struct AcceptErrors {
    /// One descriptor kept free, to be given up when the others run out so
    /// that the waiting client can be told 503 instead of hanging.
    spare: Option<File>,
    exhausted: bool,
}

impl AcceptErrors {
    pub(super) fn new() -> Self {
        Self {
            spare: spare(),
            exhausted: false,
        }
    }

    /// An accept succeeded: descriptors are available (again).
    pub(super) fn recovered(&mut self) {
        if self.exhausted {
            self.exhausted = false;
            tracing::info!("file descriptors available again; accepting connections");
        }
    }

    pub(super) async fn handle(&mut self, listener: &TcpListener, err: io::Error) {
        if is_out_of_descriptors(&err) {
            if !self.exhausted {
                self.exhausted = true;
                tracing::error!(
                    %err,
                    "out of file descriptors: new connections get 503 until some close \
                     (raise `ulimit -n` or lower --max-connections-per-ip)"
                );
            }
            self.spare = None;
            // The client whose accept just failed is still queued: take it
            // with the spare descriptor, answer it and let it go.
            if let Ok(Ok((stream, _))) =
                tokio::time::timeout(Duration::ZERO, listener.accept()).await
            {
                refuse(
                    stream,
                    "Stampede is very busy right now; please try again in a moment.",
                )
                .await;
            }
            self.spare = spare();
        } else if is_client_gone(&err) {
            // That client hung up before we took it; nothing to do.
            return;
        } else {
            tracing::warn!(%err, "accept failed");
        }
        tokio::time::sleep(BACKOFF).await;
    }
}

fn spare() -> Option<File> {
    File::open("/dev/null").ok()
}

fn is_out_of_descriptors(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(code) if code == libc::EMFILE || code == libc::ENFILE)
        || matches!(err.kind(), io::ErrorKind::OutOfMemory)
}

fn is_client_gone(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
    )
}
