//! The order's tickets as a PDF: one A4 page per ticket.
//!
//! Written with `pdf-writer` and the base-14 Helvetica (nothing embedded, so
//! a ticket is a few kilobytes); the text is WinAnsi (`winansi.rs`), with
//! '?' for the characters it lacks.

use miniz_oxide::deflate::compress_to_vec_zlib;
use pdf_writer::{Content, Filter, Finish, Name, Pdf, Rect, Ref, Str, TextStr};

use super::winansi::{self, Face};
use super::{DocumentError, OrderDocuments, TicketCode, qr};

/// Points per millimetre.
const MM: f32 = 72.0 / 25.4;
const PAGE_WIDTH: f32 = 210.0 * MM;
const PAGE_HEIGHT: f32 = 297.0 * MM;
const MARGIN: f32 = 20.0 * MM;
const TEXT_WIDTH: f32 = PAGE_WIDTH - 2.0 * MARGIN;
/// The printed QR code's side: 60 mm scans from paper at arm's length, and
/// from a phone's screen at its zoom.
const QR_SIDE: f32 = 60.0 * MM;
/// Baseline to baseline, as a multiple of the font size.
const LEADING: f32 = 1.25;

const REGULAR: Name = Name(b"F1");
const BOLD: Name = Name(b"F2");
const QR_IMAGE: Name = Name(b"Qr");

/// The order's tickets as a PDF, one A4 page per ticket in the order given.
/// Each page carries the event, the ticket's number, its code in 4-character
/// groups (for reading out when a scanner fails) and as is, and its QR code.
pub fn render(docs: &OrderDocuments) -> Result<Vec<u8>, DocumentError> {
    if docs.tickets.is_empty() {
        return Err(DocumentError::NoTickets);
    }
    // An order holds a handful of tickets; i32::MAX is never reached.
    let count = i32::try_from(docs.tickets.len()).unwrap_or(i32::MAX);

    let mut next = Ref::new(1);
    let catalog = next.bump();
    let tree = next.bump();
    let info = next.bump();
    let regular = next.bump();
    let bold = next.bump();
    let pages: Vec<[Ref; 3]> = docs
        .tickets
        .iter()
        .map(|_| [next.bump(), next.bump(), next.bump()])
        .collect();

    let mut pdf = Pdf::new();
    pdf.catalog(catalog).pages(tree);
    pdf.pages(tree)
        .kids(pages.iter().map(|p| p[0]))
        .count(count);
    pdf.document_info(info)
        .title(TextStr(docs.event_title))
        .producer(TextStr("Stampede"));
    for (id, name) in [(regular, "Helvetica"), (bold, "Helvetica-Bold")] {
        pdf.type1_font(id)
            .base_font(Name(name.as_bytes()))
            .encoding_predefined(Name(b"WinAnsiEncoding"));
    }

    let header = Header::new(docs);
    for (ticket, &[page_id, content_id, image_id]) in docs.tickets.iter().zip(&pages) {
        let modules = qr::modules(ticket.code)?;
        let side = i32::try_from(modules.width).map_err(|e| DocumentError::Qr(e.to_string()))?;

        let mut page = pdf.page(page_id);
        page.media_box(Rect::new(0.0, 0.0, PAGE_WIDTH, PAGE_HEIGHT))
            .parent(tree)
            .contents(content_id);
        let mut resources = page.resources();
        resources.fonts().pair(REGULAR, regular).pair(BOLD, bold);
        resources.x_objects().pair(QR_IMAGE, image_id);
        resources.finish();
        page.finish();

        // One sample per module, not interpolated: the viewer scales it up
        // with sharp edges, and the file stays small.
        let samples = compress_to_vec_zlib(&modules.samples, 9);
        let mut image = pdf.image_xobject(image_id, &samples);
        image.filter(Filter::FlateDecode);
        image.width(side).height(side);
        image.color_space().device_gray();
        image.bits_per_component(8).interpolate(false);
        image.finish();

        pdf.stream(content_id, &page_content(docs, &header, ticket));
    }
    Ok(pdf.finish())
}

/// The lines every page of the order shares, encoded and wrapped once.
struct Header {
    title: Vec<Vec<u8>>,
    starts_at: Vec<Vec<u8>>,
    venue: Vec<Vec<u8>>,
    ticket_type: Vec<Vec<u8>>,
    footer: Vec<Vec<u8>>,
}

const TITLE: (Face, f32) = (Face::Bold, 24.0);
const DETAIL: (Face, f32) = (Face::Regular, 14.0);
const TICKET_TYPE: (Face, f32) = (Face::Bold, 14.0);
const NUMBER: (Face, f32) = (Face::Regular, 12.0);
const GROUPED_CODE: (Face, f32) = (Face::Bold, 18.0);
const SMALL: (Face, f32) = (Face::Regular, 10.0);

impl Header {
    fn new(docs: &OrderDocuments) -> Self {
        let wrap = |text: &str, (face, size): (Face, f32), lines| {
            winansi::wrap(&winansi::encode(text), face, size, TEXT_WIDTH, lines)
        };
        let footer = format!("Show this code at the door. Order {}", docs.order_id);
        Header {
            title: wrap(docs.event_title, TITLE, 3),
            starts_at: wrap(docs.starts_at_text, DETAIL, 2),
            venue: wrap(docs.venue, DETAIL, 2),
            ticket_type: wrap(docs.ticket_type, TICKET_TYPE, 2),
            footer: wrap(&footer, SMALL, 2),
        }
    }
}

/// One ticket's page, drawn from the top margin down.
fn page_content(docs: &OrderDocuments, header: &Header, ticket: &TicketCode) -> Vec<u8> {
    let mut page = Column {
        content: Content::new(),
        y: PAGE_HEIGHT - MARGIN,
    };
    page.lines(TITLE, &header.title, Align::Left);
    page.y -= 8.0;
    page.lines(DETAIL, &header.starts_at, Align::Left);
    page.lines(DETAIL, &header.venue, Align::Left);
    page.y -= 4.0;
    page.lines(TICKET_TYPE, &header.ticket_type, Align::Left);
    let number = format!("Ticket {} of {}", ticket.position, docs.tickets.len());
    page.lines(NUMBER, &[number.into_bytes()], Align::Left);

    page.y -= 10.0 * MM;
    page.content
        .save_state()
        .transform([
            QR_SIDE,
            0.0,
            0.0,
            QR_SIDE,
            (PAGE_WIDTH - QR_SIDE) / 2.0,
            page.y - QR_SIDE,
        ])
        .x_object(QR_IMAGE)
        .restore_state();
    page.y -= QR_SIDE + 4.0 * MM;

    let code = winansi::encode(ticket.code);
    let grouped = code.chunks(4).collect::<Vec<_>>().join(&b' ');
    let (face, size) = GROUPED_CODE;
    let grouped = winansi::wrap(&grouped, face, size, TEXT_WIDTH, 3);
    page.lines(GROUPED_CODE, &grouped, Align::Center);
    let (face, size) = SMALL;
    page.lines(
        SMALL,
        &winansi::wrap(&code, face, size, TEXT_WIDTH, 3),
        Align::Center,
    );
    page.y -= 6.0 * MM;
    page.lines(SMALL, &header.footer, Align::Center);
    page.content.finish().to_vec()
}

#[derive(Clone, Copy)]
enum Align {
    Left,
    Center,
}

/// A content stream and the height its next line goes under.
struct Column {
    content: Content,
    y: f32,
}

impl Column {
    /// Sets `lines` one under the other, each in its own text object placed
    /// with an absolute matrix, so a line's position never depends on the last.
    fn lines(&mut self, (face, size): (Face, f32), lines: &[Vec<u8>], align: Align) {
        let font = match face {
            Face::Regular => REGULAR,
            Face::Bold => BOLD,
        };
        for line in lines {
            self.y -= size * LEADING;
            let x = match align {
                Align::Left => MARGIN,
                Align::Center => (PAGE_WIDTH - face.width(line, size)) / 2.0,
            };
            self.content
                .begin_text()
                .set_font(font, size)
                .set_text_matrix([1.0, 0.0, 0.0, 1.0, x, self.y])
                .show(Str(line))
                .end_text();
        }
    }
}

#[cfg(test)]
mod tests;
