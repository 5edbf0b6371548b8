use std::io::Read;

use jiff::tz::TimeZone;
use lopdf::{Document, Object, content::Content};

use super::*;
use crate::tickets::qr::read_back;

const CODES: [&str; 3] = [
    "K7Q2M4X9PL3VWT8ZR6YDN5HC2JBF4GSA",
    "ABCDEFGHJKLMNPQRSTUVWXYZ23456789",
    "Z9Y8X7W6V5U4T3S2R1QPNMLKJHGFEDCB",
];

/// Renders an order of `codes.len()` tickets titled `title`.
fn rendered(title: &str, codes: &[&str]) -> Vec<u8> {
    let tickets: Vec<TicketCode> = codes
        .iter()
        .zip(1..)
        .map(|(code, position)| TicketCode { position, code })
        .collect();
    let zone = TimeZone::get("Europe/Berlin").unwrap();
    let docs = OrderDocuments {
        order_id: uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef),
        event_title: title,
        venue: "Großer Saal, Philharmonie – Berlin",
        starts_at: "2027-07-10T17:30:00Z".parse().unwrap(),
        time_zone: &zone,
        time_zone_name: "Europe/Berlin",
        starts_at_text: "Sat 10 Jul 2027, 19:30 CEST",
        ticket_type: "Standing",
        order_url: "https://tickets.example.org/orders/x?t=secret",
        host: "tickets.example.org",
        tickets: &tickets,
    };
    render(&docs).unwrap()
}

/// A string a page shows, with the font size and position it is set at.
struct Shown {
    face: Face,
    size: f32,
    x: f32,
    bytes: Vec<u8>,
}

fn shown(doc: &Document, page: lopdf::ObjectId) -> Vec<Shown> {
    let content = Content::decode(&doc.get_page_content(page)).unwrap();
    let (mut face, mut size, mut x) = (Face::Regular, 0.0, 0.0);
    let mut shown = Vec::new();
    for op in content.operations {
        match (op.operator.as_str(), op.operands.as_slice()) {
            ("Tf", [font, s]) => {
                let bold = font.as_name().unwrap() == BOLD.0;
                face = if bold { Face::Bold } else { Face::Regular };
                size = s.as_float().unwrap();
            }
            ("Tm", [.., e, _]) => x = e.as_float().unwrap(),
            ("Tj", [Object::String(bytes, _)]) => shown.push(Shown {
                face,
                size,
                x,
                bytes: bytes.clone(),
            }),
            _ => {}
        }
    }
    shown
}

/// `gray` (`width` samples a row) scaled up by `factor`: rqrr needs
/// several pixels per module, the PDF's image has one.
fn upscale(width: usize, gray: &[u8], factor: usize) -> Vec<u8> {
    gray.chunks(width)
        .flat_map(|row| {
            let line: Vec<u8> = row
                .iter()
                .flat_map(|&s| std::iter::repeat_n(s, factor))
                .collect();
            std::iter::repeat_n(line, factor).flatten()
        })
        .collect()
}

/// The codes of the QR images on each page, in page order.
fn page_codes(doc: &Document) -> Vec<String> {
    let mut codes = Vec::new();
    for (_, page) in doc.get_pages() {
        let images = doc.get_page_images(page).unwrap();
        assert_eq!(images.len(), 1, "one QR image a page");
        let image = &images[0];
        assert_eq!(
            image.filters.as_deref(),
            Some(&["FlateDecode".to_owned()][..])
        );
        assert_eq!(image.color_space.as_deref(), Some("DeviceGray"));
        assert_eq!(image.bits_per_component, Some(8));
        assert_eq!(
            image.origin_dict.get(b"Interpolate").unwrap(),
            &Object::Boolean(false)
        );
        let (width, height) = (image.width as usize, image.height as usize);
        let mut gray = Vec::new();
        flate2::read::ZlibDecoder::new(image.content)
            .read_to_end(&mut gray)
            .unwrap();
        assert_eq!(gray.len(), width * height, "one 8-bit sample a module");
        let big = upscale(width, &gray, 6);
        let found = read_back(width * 6, height * 6, &big);
        assert_eq!(found.len(), 1, "one QR code a page");
        codes.extend(found);
    }
    codes
}

#[test]
fn one_page_per_ticket_each_with_its_own_code_in_order() {
    for n in [1, 3] {
        let doc = Document::load_mem(&rendered("Jazz Night", &CODES[..n])).unwrap();
        assert_eq!(doc.get_pages().len(), n);
        assert_eq!(page_codes(&doc), CODES[..n].to_vec());
    }
}

#[test]
fn each_page_says_the_event_the_number_and_the_code() {
    let doc = Document::load_mem(&rendered("Jazz Night", &CODES)).unwrap();
    for ((_, page), (i, code)) in doc.get_pages().into_iter().zip(CODES.iter().enumerate()) {
        let texts: Vec<Vec<u8>> = shown(&doc, page).into_iter().map(|s| s.bytes).collect();
        let has = |text: &[u8]| texts.iter().any(|t| t == text);
        assert!(has(b"Jazz Night"));
        assert!(has(b"Sat 10 Jul 2027, 19:30 CEST"));
        assert!(
            has(b"Gro\xdfer Saal, Philharmonie \x96 Berlin"),
            "Latin-1 and cp1252 kept"
        );
        assert!(has(b"Standing"));
        assert!(has(format!("Ticket {} of 3", i + 1).as_bytes()));
        let grouped = code.as_bytes().chunks(4).collect::<Vec<_>>().join(&b' ');
        assert!(has(&grouped), "the code in groups of four");
        assert!(has(code.as_bytes()), "the raw code");
        assert!(has(
            b"Show this code at the door. Order 01234567-89ab-cdef-0123-456789abcdef"
        ));
    }
}

#[test]
fn the_document_info_names_the_event_and_stampede() {
    let doc = Document::load_mem(&rendered("Jazz Night", &CODES[..1])).unwrap();
    let info = doc.trailer.get(b"Info").unwrap().as_reference().unwrap();
    let info = doc.get_dictionary(info).unwrap();
    assert_eq!(info.get(b"Title").unwrap().as_str().unwrap(), b"Jazz Night");
    assert_eq!(
        info.get(b"Producer").unwrap().as_str().unwrap(),
        b"Stampede"
    );
}

#[test]
fn characters_outside_winansi_print_as_question_marks() {
    let doc = Document::load_mem(&rendered("Konzert 東京 €", &CODES[..1])).unwrap();
    let (_, page) = doc.get_pages().into_iter().next().unwrap();
    let texts: Vec<Vec<u8>> = shown(&doc, page).into_iter().map(|s| s.bytes).collect();
    assert!(texts.contains(&b"Konzert ?? \x80".to_vec()), "{texts:?}");
}

#[test]
fn a_long_title_stays_on_the_page() {
    let title = "The Quite Unreasonably Long Annual Festival of Everything That Is Loud, \
                 Bright and Late, With Friends, Guests, Surprises and an Encore Nobody Expected";
    let doc = Document::load_mem(&rendered(title, &CODES[..1])).unwrap();
    let (_, page) = doc.get_pages().into_iter().next().unwrap();
    let shown = shown(&doc, page);
    let title_lines: Vec<&Shown> = shown.iter().filter(|s| s.size == TITLE.1).collect();
    assert_eq!(title_lines.len(), 3);
    assert_eq!(
        title_lines[2].bytes.last(),
        Some(&winansi::ELLIPSIS),
        "cut with an ellipsis"
    );
    for line in &shown {
        let width = line.face.width(&line.bytes, line.size);
        assert!(
            line.x >= MARGIN - 0.01,
            "{:?} starts left of the margin",
            line.bytes
        );
        assert!(
            line.x + width <= PAGE_WIDTH - MARGIN + 0.01,
            "{:?} runs past the margin",
            String::from_utf8_lossy(&line.bytes)
        );
    }
}

#[test]
fn an_order_without_tickets_is_an_error() {
    let zone = TimeZone::UTC;
    let docs = OrderDocuments {
        order_id: uuid::Uuid::nil(),
        event_title: "Jazz Night",
        venue: "Hall",
        starts_at: jiff::Timestamp::UNIX_EPOCH,
        time_zone: &zone,
        time_zone_name: "UTC",
        starts_at_text: "Thu 1 Jan 1970, 00:00 UTC",
        ticket_type: "Standing",
        order_url: "https://tickets.example.org/orders/x",
        host: "tickets.example.org",
        tickets: &[],
    };
    assert!(matches!(render(&docs), Err(DocumentError::NoTickets)));
}
