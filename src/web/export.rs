//! The organizer's CSV export of an event's orders: not a page, a file,
//! streamed. Rows are read [`ROWS_PER_PAGE`] at a time, each page a short
//! query of its own (keyset on `(created_at, id)`), so no pool connection
//! is held while the client is slow; they are written into chunks of about
//! [`CHUNK_BYTES`], and at most [`CHUNKS_AHEAD`] chunks wait in memory: an
//! export's memory stays constant however many orders it holds. At most
//! [`MAX_EXPORTS`] run at once (503 beyond), one organizer runs one of
//! them at a time (429 beyond: nobody's stalled downloads take every slot),
//! and one whose client stops reading for [`STALL`] (or the app's
//! `Limits::export_stall`) is cut off, which frees both slots.

use std::{
    borrow::Cow,
    collections::HashSet,
    pin::Pin,
    sync::{LazyLock, Mutex},
    task::{Context, Poll},
    time::Duration,
};

use axum::body::{Body, Bytes};
use http_body::Frame;
use sqlx::PgPool;
use time::{UtcOffset, format_description::well_known::Rfc3339};
use tokio::sync::{Semaphore, mpsc};

use crate::{
    db::{self, dashboard::ExportRow},
    domain::{EventId, OrganizerId, Zone},
    error::AppError,
};

/// Bytes per chunk of the streamed body (a row may take a chunk past it).
pub const CHUNK_BYTES: usize = 32 * 1024;
/// Chunks written ahead of the client.
pub const CHUNKS_AHEAD: usize = 4;
/// Exports running at once in this process.
pub const MAX_EXPORTS: usize = 4;
/// How long an export waits for a client that reads nothing (the default of
/// `Limits::export_stall`).
pub const STALL: Duration = Duration::from_secs(30);
/// Orders read per query.
pub const ROWS_PER_PAGE: i64 = 500;

static EXPORTS: Semaphore = Semaphore::const_new(MAX_EXPORTS);

/// The organizers with an export running in this process.
static EXPORTING: LazyLock<Mutex<HashSet<OrganizerId>>> = LazyLock::new(Mutex::default);

/// An organizer's one running export; the slot frees when it is dropped.
struct OrganizerSlot(OrganizerId);

impl OrganizerSlot {
    /// The organizer's slot, unless an export of theirs is running.
    fn take(organizer_id: OrganizerId) -> Option<Self> {
        let mut running = EXPORTING
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // Not `then_some(Self(..))`: that builds (and drops, freeing the
        // running export's slot) a slot even when the insert fails.
        if running.insert(organizer_id) {
            Some(Self(organizer_id))
        } else {
            None
        }
    }
}

impl Drop for OrganizerSlot {
    fn drop(&mut self) {
        let mut running = EXPORTING
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        running.remove(&self.0);
    }
}

type Chunk = Result<Bytes, std::io::Error>;

/// A response body fed by the export task through a bounded channel.
struct ChannelBody(mpsc::Receiver<Chunk>);

impl http_body::Body for ChannelBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.0
            .poll_recv(cx)
            .map(|chunk| chunk.map(|chunk| chunk.map(Frame::data)))
    }
}

/// The export of one event's orders as a streamed CSV body; 429 while
/// another export of the organizer's runs, 503 when [`MAX_EXPORTS`] are
/// running. A client that reads nothing for `stall` cuts it off.
pub fn orders_csv_body(
    db: PgPool,
    organizer_id: OrganizerId,
    event_id: EventId,
    zone: Zone,
    stall: Duration,
) -> Result<Body, AppError> {
    let slot = OrganizerSlot::take(organizer_id).ok_or(AppError::TooManyRequests {
        retry_after_secs: stall.as_secs().max(1),
    })?;
    let permit = EXPORTS.try_acquire().map_err(|_| AppError::Overloaded)?;
    let (tx, rx) = mpsc::channel::<Chunk>(CHUNKS_AHEAD);
    tokio::spawn(async move {
        let (_slot, _permit) = (slot, permit);
        if let Err(err) = stream_rows(&db, (organizer_id, event_id), &zone, stall, &tx).await {
            tracing::warn!(%event_id, error = %err, "CSV export cut short");
            // The client sees the body end in an error, not a short file.
            let _ = tx.send(Err(std::io::Error::other(err.to_string()))).await;
        }
    });
    Ok(Body::new(ChannelBody(rx)))
}

/// Why an export stopped before its end.
#[derive(Debug, thiserror::Error)]
enum Cut {
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    #[error("{0}")]
    Csv(#[from] AppError),
    #[error("the client stopped reading")]
    Stalled,
    #[error("the client went away")]
    Gone,
}

async fn stream_rows(
    db: &PgPool,
    (organizer_id, event_id): (OrganizerId, EventId),
    zone: &Zone,
    stall: Duration,
    tx: &mpsc::Sender<Chunk>,
) -> Result<(), Cut> {
    let send = |chunk: Vec<u8>| async move {
        match tokio::time::timeout(stall, tx.send(Ok(Bytes::from(chunk)))).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(Cut::Gone),
            Err(_) => Err(Cut::Stalled),
        }
    };
    let new_writer = || csv::Writer::from_writer(Vec::with_capacity(CHUNK_BYTES * 2));
    let mut writer = new_writer();
    writer
        .write_record(CSV_HEADER)
        .map_err(AppError::internal)?;
    let mut after = None;
    loop {
        // The connection is back in the pool once the page is read: the
        // sends below wait on the client holding none.
        let page =
            db::dashboard::export_page(db, organizer_id, event_id, after, ROWS_PER_PAGE).await?;
        let full_page = page.len() as i64 == ROWS_PER_PAGE;
        after = page.last().map(|row| (row.created_at, row.id));
        for row in &page {
            write_row(&mut writer, row, zone)?;
            if writer.get_ref().len() >= CHUNK_BYTES {
                let full = std::mem::replace(&mut writer, new_writer());
                let chunk = full
                    .into_inner()
                    .map_err(|err| AppError::internal(err.into_error()))?;
                send(chunk).await?;
            }
        }
        if !full_page {
            break;
        }
    }
    let last = writer
        .into_inner()
        .map_err(|err| AppError::internal(err.into_error()))?;
    if !last.is_empty() {
        send(last).await?;
    }
    Ok(())
}

/// The columns of the CSV export, in order: `created_at` is RFC 3339 in
/// UTC (`Z`), `created_at_local` the same instant in the event's zone with
/// its offset and name ("2027-07-10T19:30:00+02:00[Europe/Berlin]").
pub const CSV_HEADER: [&str; 12] = [
    "order_id",
    "created_at",
    "email",
    "ticket_type",
    "quantity",
    "unit_price_minor",
    "currency",
    "status",
    "ticket_codes",
    "payment",
    "payment_intent",
    "created_at_local",
];

/// A cell that a spreadsheet would run as a formula (or that some treat as
/// one) gets a leading `'`, which spreadsheets show as text.
pub fn neutralise_cell(cell: &str) -> Cow<'_, str> {
    if cell.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        Cow::Owned(format!("'{cell}"))
    } else {
        Cow::Borrowed(cell)
    }
}

/// One order as a CSV record (RFC 4180, quoted where needed, UTF-8), every
/// cell neutralised against formula injection.
fn write_row(
    writer: &mut csv::Writer<Vec<u8>>,
    row: &ExportRow,
    zone: &Zone,
) -> Result<(), AppError> {
    let created_at = row
        .created_at
        .to_offset(UtcOffset::UTC)
        .format(&Rfc3339)
        .map_err(AppError::internal)?;
    let cells = [
        row.id.to_string(),
        created_at,
        row.email.clone(),
        row.ticket_type.clone(),
        row.quantity.to_string(),
        row.unit_price_minor.to_string(),
        row.currency.clone(),
        row.status.to_string(),
        row.ticket_codes.clone(),
        row.payment.clone(),
        row.payment_intent.clone(),
        zone.format_csv(row.created_at),
    ];
    writer
        .write_record(cells.iter().map(|cell| neutralise_cell(cell).into_owned()))
        .map_err(AppError::internal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_organizer_runs_one_export_at_a_time() {
        let (ada, bob) = (
            OrganizerId::from(uuid::Uuid::new_v4()),
            OrganizerId::from(uuid::Uuid::new_v4()),
        );
        let first = OrganizerSlot::take(ada).expect("a first export");
        assert!(OrganizerSlot::take(ada).is_none(), "a second one at once");
        let other = OrganizerSlot::take(bob).expect("another organizer's");
        drop(first);
        assert!(OrganizerSlot::take(ada).is_some(), "freed when it ends");
        drop(other);
    }

    #[test]
    fn formula_cells_are_neutralised() {
        for bad in ["=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx"] {
            assert_eq!(neutralise_cell(bad), format!("'{bad}"), "{bad:?}");
        }
        for fine in ["ada@example.org", "Standing", "1", "", " =x"] {
            assert_eq!(neutralise_cell(fine), fine);
        }
    }
}
