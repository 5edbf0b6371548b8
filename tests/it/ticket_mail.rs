//! Tickets in the buyer's inbox (issue 36), against real Postgres, the app
//! and a real SMTP server on loopback: every confirmed order gets one mail
//! with its tickets (text and HTML, the QR codes inline as PNG, a PDF whose
//! pages' QR codes read back as the ticket codes, a calendar entry in the
//! event's zone); a cancelled order gets a mail saying so; "find my
//! tickets" answers the same for any address and mails the links of the
//! orders; an organizer resends; the files download from the order page.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use mail_parser::{MessageParser, MimeHeaders as _};
use reqwest::StatusCode;
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};

use crate::common::{
    self, TicketSpec, api_buy, pool, published_event,
    smtp::{PUBLIC, Sink, app_and_mailer},
    ticket_codes,
};

/// The codes a PDF's pages show as QR codes, page by page.
fn qr_codes_in_pdf(pdf: &[u8]) -> Vec<String> {
    let doc = lopdf::Document::load_mem(pdf).expect("a PDF that parses");
    let mut codes = Vec::new();
    for (_, page) in doc.get_pages() {
        let images = doc.get_page_images(page).expect("the page's images");
        assert_eq!(images.len(), 1, "one QR image per page");
        let image = &images[0];
        let raw = image.content.to_vec();
        let pixels = miniz_oxide::inflate::decompress_to_vec_zlib(&raw).expect("a Flate image");
        let (width, height) = (image.width as usize, image.height as usize);
        codes.push(read_qr(&pixels, width, height));
    }
    codes
}

/// A grayscale QR image, scaled up (a PDF image has one pixel a module).
fn read_qr(gray: &[u8], width: usize, height: usize) -> String {
    let scale = 8;
    let mut prepared =
        rqrr::PreparedImage::prepare_from_greyscale(width * scale, height * scale, |x, y| {
            gray[(y / scale) * width + x / scale]
        });
    let grids = prepared.detect_grids();
    assert_eq!(grids.len(), 1, "one QR code in the image");
    grids[0].decode().expect("a QR code that decodes").1
}

fn png_code(png: &[u8]) -> String {
    let decoder = png::Decoder::new(std::io::Cursor::new(png));
    let mut reader = decoder.read_info().unwrap();
    let mut buffer = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buffer).unwrap();
    let (width, height) = (info.width as usize, info.height as usize);
    let mut prepared =
        rqrr::PreparedImage::prepare_from_greyscale(width, height, |x, y| buffer[y * width + x]);
    prepared.detect_grids()[0].decode().unwrap().1
}

/// `POST /api/v1/organizer/orders/{order}/{action}` with `org`'s token.
async fn order_action(org: &common::Organizer, order: uuid::Uuid, action: &str) -> StatusCode {
    org.api(
        reqwest::Method::POST,
        &format!("/api/v1/organizer/orders/{order}/{action}"),
    )
    .send()
    .await
    .unwrap()
    .status()
}

async fn order_email_count(pool: &PgPool, email: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM orders WHERE email = $1")
        .bind(email)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test]
async fn a_confirmed_order_gets_one_mail_with_tickets_that_scan(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 10).await;
    let fixture = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    sqlx::query("UPDATE events SET time_zone = 'Europe/Berlin', title = 'Nacht der Straße, 2027' WHERE id = $1")
        .bind(fixture.event_id)
        .execute(&pool)
        .await
        .unwrap();
    let sink = Sink::start().await;
    let (app, mailer) = app_and_mailer(&pool, Some(&sink)).await;
    let order_id = api_buy(&app, fixture.ticket_type_id(), 3, "ada@example.org").await;
    let codes = ticket_codes(&pool, order_id).await;
    assert_eq!(codes.len(), 3);

    let mails = sink.wait_for(1, Duration::from_secs(20)).await;
    // Time for a second mail, were there one.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(sink.mails().len(), 1, "one mail for one confirmed order");
    let raw = &mails[0].data;
    assert_eq!(mails[0].to, ["ada@example.org"]);
    let message = MessageParser::default()
        .parse(raw.as_bytes())
        .expect("a mail that parses");
    assert_eq!(
        message.subject(),
        Some("Your tickets: Nacht der Straße, 2027")
    );

    // Text and HTML, the link in both; the event's local time, labeled.
    let text = message.body_text(0).expect("a text part");
    let html = message.body_html(0).expect("an HTML part");
    let link = text
        .lines()
        .find(|line| line.starts_with(&format!("{PUBLIC}/orders/{order_id}?t=")))
        .expect("the order's link")
        .to_owned();
    assert!(html.contains(&link.replace('&', "&amp;")), "{html}");
    assert!(text.contains("CET") || text.contains("CEST"), "{text}");
    for code in &codes {
        assert!(text.contains(code.as_str()), "{text}");
    }

    // Inline PNGs, one per ticket, each reading back as its code, and
    // referenced by the HTML.
    let mut inline = Vec::new();
    let mut pdf = None;
    let mut ics = None;
    for part in message.attachments() {
        let content_type = part.content_type().unwrap();
        let kind = format!(
            "{}/{}",
            content_type.ctype(),
            content_type.subtype().unwrap_or("")
        );
        match kind.as_str() {
            "image/png" => {
                let cid = part
                    .content_id()
                    .expect("an inline image's Content-ID")
                    .to_owned();
                assert!(
                    html.contains(&format!("cid:{cid}")),
                    "{cid} not in the HTML"
                );
                inline.push(png_code(part.contents()));
            }
            "application/pdf" => pdf = Some(part.contents().to_vec()),
            "text/calendar" => ics = Some(String::from_utf8(part.contents().to_vec()).unwrap()),
            other => panic!("an unexpected part {other}"),
        }
    }
    assert_eq!(inline, codes, "the inline QR codes are the tickets");
    // The PDF: a page per ticket, each page's QR code its ticket's code.
    assert_eq!(qr_codes_in_pdf(&pdf.expect("a PDF")), codes);
    // The calendar entry: RFC 5545, in Berlin's time.
    let ics = ics.expect("a calendar entry");
    assert!(
        ics.lines().count() > 10 && ics.split("\r\n").all(|line| line.len() <= 75),
        "{ics}"
    );
    let calendar = ical::IcalParser::new(ics.as_bytes())
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(calendar.events.len(), 1);
    assert_eq!(calendar.timezones.len(), 1);
    let start = calendar.events[0]
        .properties
        .iter()
        .find(|p| p.name == "DTSTART")
        .unwrap();
    let params = start.params.clone().unwrap_or_default();
    assert!(
        params
            .iter()
            .any(|(name, values)| name == "TZID" && values == &["Europe/Berlin"]),
        "{params:?}"
    );

    // The mailed link shows the tickets to whoever has the mailbox.
    let path = link.strip_prefix(PUBLIC).unwrap();
    let page = app
        .client
        .get(app.url(path))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("Your tickets") && page.contains("tickets.pdf?t="),
        "{page}"
    );
    // The files download with the same proof, and not without.
    let pdf_path = format!(
        "/orders/{order_id}/tickets.pdf?{}",
        path.split('?').nth(1).unwrap()
    );
    let download = app.client.get(app.url(&pdf_path)).send().await.unwrap();
    assert_eq!(download.status(), StatusCode::OK);
    assert_eq!(download.headers()["content-type"], "application/pdf");
    assert_eq!(qr_codes_in_pdf(&download.bytes().await.unwrap()), codes);
    let ics_path = pdf_path.replace("tickets.pdf", "event.ics");
    let download = app.client.get(app.url(&ics_path)).send().await.unwrap();
    assert_eq!(download.status(), StatusCode::OK);
    assert!(
        download
            .text()
            .await
            .unwrap()
            .contains("TZID=Europe/Berlin")
    );
    for bare in [
        format!("/orders/{order_id}/tickets.pdf"),
        format!("/orders/{order_id}/event.ics?t=not-the-token-at-all-0123456789abcdef"),
    ] {
        let refused = app.client.get(app.url(&bare)).send().await.unwrap();
        assert_eq!(refused.status(), StatusCode::FORBIDDEN, "{bare}");
    }
    mailer.abort();
}

#[sqlx::test]
async fn a_cancelled_order_gets_a_mail_saying_so_and_an_organizer_resends(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 10).await;
    let sink = Sink::start().await;
    let (app, mailer) = app_and_mailer(&pool, Some(&sink)).await;
    let org = app.organizer("org@example.org").await;
    let fixture =
        common::organizer::owned_published_event(&org, &[TicketSpec::new(10, 2, 2)]).await;
    let kept = api_buy(&app, fixture.ticket_type_id(), 1, "ada@example.org").await;
    let cancelled = api_buy(&app, fixture.ticket_type_id(), 2, "bob@example.org").await;
    sink.wait_for(2, Duration::from_secs(20)).await;

    assert_eq!(
        order_action(&org, cancelled, "cancel").await,
        StatusCode::OK
    );
    let mails = sink.wait_for(3, Duration::from_secs(20)).await;
    let cancel = mails
        .iter()
        .find(|m| {
            m.header("Subject")
                .is_some_and(|s| s.starts_with("Order cancelled"))
        })
        .expect("a cancellation mail");
    assert_eq!(cancel.to, ["bob@example.org"]);
    assert!(
        cancel.data.contains("The organizer cancelled your order"),
        "{}",
        cancel.data
    );

    // A resend: the same tickets, a mail of its own; a second ask within a
    // minute is the same mail.
    for _ in 0..2 {
        assert_eq!(
            order_action(&org, kept, "resend").await,
            StatusCode::ACCEPTED
        );
    }
    let mails = sink.wait_for(4, Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(sink.mails().len(), 4, "one resend");
    let to_ada: Vec<_> = mails
        .iter()
        .filter(|m| m.to == ["ada@example.org"])
        .collect();
    assert_eq!(to_ada.len(), 2);
    assert_ne!(
        to_ada[0].header("Message-ID"),
        to_ada[1].header("Message-ID")
    );
    assert!(
        to_ada
            .iter()
            .all(|m| m.header("Subject").unwrap().starts_with("Your tickets"))
    );
    // Not confirmed: nothing to send; another organizer's: not found.
    assert_eq!(
        order_action(&org, cancelled, "resend").await,
        StatusCode::CONFLICT
    );
    let other = app.organizer("other@example.org").await;
    assert_eq!(
        order_action(&other, kept, "resend").await,
        StatusCode::NOT_FOUND
    );
    // The dashboard's button asks the same (CSRF-protected, owner only).
    let resp = org
        .post_form(
            &format!(
                "/organizer/events/{}/orders/{kept}/resend",
                fixture.event_id
            ),
            &[],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let asked: i64 = sqlx::query_scalar("SELECT count(*) FROM mail_requests WHERE order_id = $1")
        .bind(kept)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        asked, 1,
        "within a minute of the last resend, no second one"
    );
    mailer.abort();
}

#[sqlx::test]
async fn find_my_tickets_answers_the_same_for_any_address_and_mails_the_links_once(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 10).await;
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let sink = Sink::start().await;
    let (app, mailer) = app_and_mailer(&pool, Some(&sink)).await;
    let first = api_buy(&app, fixture.ticket_type_id(), 1, "ada@example.org").await;
    let second = api_buy(&app, fixture.ticket_type_id(), 1, "ada@example.org").await;
    sink.wait_for(2, Duration::from_secs(20)).await;

    let form = app.client.get(app.url("/tickets")).send().await.unwrap();
    assert_eq!(form.status(), StatusCode::OK);
    let ask = |email: &'static str| {
        let app = &app;
        async move {
            let resp = app.post_form("/tickets", &[("email", email)]).await;
            let status = resp.status();
            let page = resp.text().await.unwrap();
            (status, page.replace(email, "ADDRESS"))
        }
    };
    let (status, with_orders) = ask("Ada@Example.org").await;
    assert_eq!(status, StatusCode::OK);
    let (status, without) = ask("nobody@example.org").await;
    assert_eq!(status, StatusCode::OK);
    // Nothing tells the two apart but the address typed.
    assert_eq!(with_orders.replace("ada@example.org", "ADDRESS"), without);
    assert_eq!(order_email_count(&pool, "nobody@example.org").await, 0);
    let mails = sink.wait_for(3, Duration::from_secs(20)).await;
    // A second ask within ten minutes sends nothing more.
    let (status, _) = ask("ada@example.org").await;
    assert_eq!(status, StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(
        sink.mails().len(),
        3,
        "one lookup mail, none for an address without orders"
    );
    let lookup = &mails[2];
    assert_eq!(lookup.to, ["ada@example.org"]);
    for order in [first, second] {
        assert!(
            lookup.data.contains(&format!("{PUBLIC}/orders/{order}?t=")),
            "{}",
            lookup.data
        );
    }
    // Bad input: 422 naming the field, the form back, nothing asked.
    let resp = app
        .post_form("/tickets", &[("email", "not an address")])
        .await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let page = resp.text().await.unwrap();
    assert!(
        page.contains("not an address") && page.contains("aria-invalid=\"true\""),
        "{page}"
    );
    let asked: i64 = sqlx::query_scalar("SELECT count(*) FROM mail_requests")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(asked, 2, "ada once, nobody once");
    mailer.abort();
}
