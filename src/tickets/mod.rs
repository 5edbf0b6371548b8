//! The documents a buyer gets for a confirmed order.
//!
//! - [`qr::png`]: one ticket's QR code as a PNG, to show inline in the
//!   confirmation mail (mail clients show PNG, not SVG). The code's content is
//!   exactly the ticket code's bytes: what the door's scanner reads.
//! - [`pdf::render`]: the tickets to print or keep on a phone, one A4 page per
//!   ticket with the event, the code spelled out for reading aloud, and its QR
//!   code large enough to scan from paper.
//! - [`calendar::ics`]: an iCalendar file that puts the event into the buyer's
//!   calendar at the right local time, with the event's own time zone
//!   described inside it (a `VTIMEZONE`), so calendars that do not know the
//!   IANA name still place it right.
//!
//! Known limit: the PDF uses the base-14 Helvetica without embedding a font,
//! so its text is WinAnsi (cp1252) only. Characters outside it (CJK, Cyrillic,
//! emoji, ...) print as '?'. The calendar file is UTF-8 and has no such limit.
//!
//! Everything here is pure: no I/O, no clock (the calendar's stamp time is
//! passed in), so the same order always gives the same documents.

pub mod calendar;
pub mod pdf;
pub mod qr;
mod winansi;

/// What the documents of one order say.
pub struct OrderDocuments<'a> {
    pub order_id: uuid::Uuid,
    pub event_title: &'a str,
    pub venue: &'a str,
    pub starts_at: jiff::Timestamp,
    /// The event's IANA zone (from `jiff::tz::TimeZone::get(name)`).
    pub time_zone: &'a jiff::tz::TimeZone,
    /// The zone's IANA name, e.g. "Europe/Berlin": the calendar's `TZID`.
    pub time_zone_name: &'a str,
    /// The local start time, already formatted (e.g. "Sat 27 Mar 2027, 19:30
    /// CET"): printed as is, so the PDF says what the pages and mails say.
    pub starts_at_text: &'a str,
    pub ticket_type: &'a str,
    /// The order page's link, with its secret.
    pub order_url: &'a str,
    /// The deployment's host name, e.g. "tickets.example.org": it makes the
    /// calendar UID unique across deployments.
    pub host: &'a str,
    /// The order's tickets, in the order their pages are printed.
    pub tickets: &'a [TicketCode<'a>],
}

/// One ticket of an order: its number within the order and its code.
pub struct TicketCode<'a> {
    /// 1-based, as in the tickets table: "Ticket N of M" on its page.
    pub position: i32,
    /// The ASCII code the door scans (32 characters, base32-like).
    pub code: &'a str,
}

/// Why a document could not be made.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    /// The code does not fit in a QR code (far longer than a ticket code).
    #[error("QR code: {0}")]
    Qr(String),
    /// The PNG encoder refused the image.
    #[error("PNG: {0}")]
    Png(String),
    /// An order without tickets has no pages: a PDF of none would be broken.
    #[error("the order has no tickets to print")]
    NoTickets,
}
