//! The mails about one order that need the order as it is now, not as its
//! outbox row described it: its tickets (with the PDF, the QR codes inline
//! and the calendar entry), and its cancellation.

use lettre::{
    Message,
    message::{Attachment, Body, Mailbox, MultiPart, header::ContentType},
};
use maud::html;
use sqlx::PgPool;
use time::OffsetDateTime;
use uuid::Uuid;

use super::MailSettings;
use crate::{
    domain::{OrderId, Zone, format_price},
    tickets::{self, OrderDocuments, TicketCode},
};

/// An order with its event and tickets, read when its mail is sent.
#[derive(Debug, Clone)]
pub struct OrderFacts {
    pub order_id: OrderId,
    pub email: String,
    /// `held`, `confirmed` or `cancelled`.
    pub status: String,
    pub quantity: i32,
    pub total_minor: i64,
    pub currency: String,
    pub ticket_type: String,
    pub event_title: String,
    pub venue: String,
    pub starts_at: OffsetDateTime,
    pub zone: Zone,
    /// Stripe takes the event's prices.
    pub takes_payment: bool,
    /// A payment Stripe captured for it (refunded when it is cancelled).
    pub paid: bool,
    /// In their order.
    pub codes: Vec<String>,
}

/// The order as it is now, with its event and tickets; `None` if there is
/// no such order.
pub async fn facts(db: &PgPool, order_id: OrderId) -> Result<Option<OrderFacts>, sqlx::Error> {
    Ok(facts_of(db, &[order_id]).await?.pop())
}

/// [`facts`] of several orders in one statement (a mail round's), in no
/// particular order; orders that do not exist are left out.
pub(super) async fn facts_of(
    db: impl sqlx::PgExecutor<'_>,
    order_ids: &[OrderId],
) -> Result<Vec<OrderFacts>, sqlx::Error> {
    let ids: Vec<Uuid> = order_ids.iter().map(|id| id.get()).collect();
    let rows = sqlx::query!(
        r#"SELECT o.id, o.email, o.status, o.quantity, o.unit_price_minor * o.quantity AS "total_minor!",
                  o.currency, t.name AS ticket_type, e.title, e.venue, e.starts_at,
                  e.time_zone AS "zone: Zone", e.payment = 'stripe' AS "takes_payment!",
                  EXISTS (SELECT 1 FROM payments p WHERE p.order_id = o.id
                          AND p.status = 'succeeded') AS "paid!",
                  COALESCE((SELECT array_agg(k.code ORDER BY k.position) FROM tickets k
                            WHERE k.order_id = o.id), '{}') AS "codes!"
           FROM orders o
           JOIN ticket_types t ON t.id = o.ticket_type_id
           JOIN events e ON e.id = t.event_id
           WHERE o.id = ANY($1)"#,
        &ids,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| OrderFacts {
            order_id: OrderId::from(row.id),
            email: row.email,
            status: row.status,
            quantity: row.quantity,
            total_minor: row.total_minor,
            currency: row.currency,
            ticket_type: row.ticket_type,
            event_title: row.title,
            venue: row.venue,
            starts_at: row.starts_at,
            zone: row.zone,
            takes_payment: row.takes_payment,
            paid: row.paid,
            codes: row.codes,
        })
        .collect())
}

/// What went wrong making a mail's files.
#[derive(Debug, thiserror::Error)]
pub(super) enum MailBuildError {
    #[error("the ticket documents: {0}")]
    Documents(#[from] tickets::DocumentError),
    #[error("the message: {0}")]
    Message(#[from] lettre::error::Error),
    #[error("a content type: {0}")]
    ContentType(#[from] lettre::message::header::ContentTypeErr),
}

/// The order's tickets: text and HTML (its QR codes inline, as PNG: mail
/// clients do not show SVG), the PDF (a page per ticket) and the calendar
/// entry, and the order page's link. `None`: an address the mail library
/// refuses.
pub(super) fn tickets_message(
    settings: &MailSettings,
    message_id: Uuid,
    facts: &OrderFacts,
    link: &str,
    now: OffsetDateTime,
) -> Result<Option<Message>, MailBuildError> {
    let Ok(to) = facts.email.parse::<Mailbox>() else {
        return Ok(None);
    };
    let when = facts.zone.format(facts.starts_at);
    let documents = render(facts, &settings.public_url, now)?;
    let count = facts.codes.len();
    let attached = if count == 1 {
        "Your ticket is attached as a PDF".to_owned()
    } else {
        format!("Your {count} tickets are attached as a PDF, one page per ticket,")
    };
    let text = format!(
        "Your order is confirmed: {quantity} × {ticket_type} for {title}.\n\n\
         When: {when}\n\
         Where: {venue}\n\
         Order: {order_id}\n\n\
         {attached} and shown below as codes: show one at the door for each person. The calendar file adds the event to \
         your calendar.\n\n\
         {codes}\n\n\
         Your order and its tickets, any time:\n\n{link}\n",
        quantity = facts.quantity,
        ticket_type = facts.ticket_type,
        title = facts.event_title,
        venue = facts.venue,
        order_id = facts.order_id,
        codes = facts
            .codes
            .iter()
            .zip(1..)
            .map(|(code, n)| format!("Ticket {n}: {code}"))
            .collect::<Vec<_>>()
            .join("\n"),
    );
    let page = html! {
        p { "Your order is confirmed: " (facts.quantity) " × " (facts.ticket_type) " for " strong { (facts.event_title) } "." }
        p { "When: " (when) br; "Where: " (facts.venue) br; "Order: " (facts.order_id.to_string()) }
        p { (attached) " and shown below: show one code at the door for each person." }
        @for (n, code) in (1..).zip(&facts.codes) {
            div style="margin:1em 0" {
                p { strong { "Ticket " (n) " of " (count) } }
                img src={ "cid:" (cid(n)) } width="240" height="240" alt={ "QR code of ticket " (n) };
                p style="font-family:monospace;font-size:16px" { (code) }
            }
        }
        p { a href=(link) { "Your order and its tickets, any time" } }
    };
    let mut related =
        MultiPart::related().multipart(MultiPart::alternative_plain_html(text, page.into_string()));
    for (n, png) in (1..).zip(documents.qr_pngs) {
        related = related.singlepart(
            Attachment::new_inline(cid(n)).body(Body::new(png), ContentType::parse("image/png")?),
        );
    }
    let mixed = MultiPart::mixed()
        .multipart(related)
        .singlepart(Attachment::new("tickets.pdf".to_owned()).body(
            Body::new(documents.pdf),
            ContentType::parse("application/pdf")?,
        ))
        .singlepart(Attachment::new("event.ics".to_owned()).body(
            Body::new(documents.ics),
            ContentType::parse("text/calendar; charset=utf-8; method=PUBLISH")?,
        ));
    Ok(Some(
        Message::builder()
            .from(settings.from.clone())
            .to(to)
            .subject(format!("Your tickets: {}", facts.event_title))
            .message_id(Some(format!("<{message_id}@stampede>")))
            .multipart(mixed)?,
    ))
}

fn cid(n: i32) -> String {
    format!("ticket-{n}@stampede")
}

/// An order's documents: the PDF (a page per ticket), the calendar entry,
/// and each ticket's QR code as a PNG, in the tickets' order.
pub struct Documents {
    pub pdf: Vec<u8>,
    pub ics: String,
    pub qr_pngs: Vec<Vec<u8>>,
}

/// Render the order's documents. They carry the order page's plain link,
/// never a secret or a token: a calendar entry is shared and synced, and
/// the page shows the tickets only to a visitor with a proof. The calendar
/// entry's UID is made with the site's host.
pub fn render(
    facts: &OrderFacts,
    public_url: &str,
    now: OffsetDateTime,
) -> Result<Documents, tickets::DocumentError> {
    let order_url = format!("{public_url}/orders/{}", facts.order_id);
    let when = facts.zone.format(facts.starts_at);
    let codes: Vec<TicketCode<'_>> = facts
        .codes
        .iter()
        .zip(1..)
        .map(|(code, position)| TicketCode { position, code })
        .collect();
    let host = url::Url::parse(public_url)
        .ok()
        .and_then(|url| url.host_str().map(str::to_owned))
        .unwrap_or_else(|| "stampede".to_owned());
    let instant = |at: OffsetDateTime| {
        jiff::Timestamp::from_nanosecond(at.unix_timestamp_nanos())
            .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
    };
    let docs = OrderDocuments {
        order_id: facts.order_id.get(),
        event_title: &facts.event_title,
        venue: &facts.venue,
        starts_at: instant(facts.starts_at),
        time_zone: facts.zone.tz(),
        time_zone_name: facts.zone.name(),
        starts_at_text: &when,
        ticket_type: &facts.ticket_type,
        order_url: &order_url,
        host: &host,
        tickets: &codes,
    };
    Ok(Documents {
        pdf: tickets::pdf::render(&docs)?,
        ics: tickets::calendar::ics(&docs, instant(now)),
        qr_pngs: codes
            .iter()
            .map(|ticket| tickets::qr::png(ticket.code))
            .collect::<Result<_, _>>()?,
    })
}

/// Subject and body of the mail saying the order was cancelled, and why
/// (`reason` from its outbox row: `buyer`, `organizer`, `event_cancelled`).
pub(super) fn cancelled_text(facts: &OrderFacts, reason: &str, link: &str) -> (String, String) {
    let why = match reason {
        "buyer" => "You cancelled your order".to_owned(),
        "event_cancelled" => format!("The organizer cancelled {}", facts.event_title),
        _ => "The organizer cancelled your order".to_owned(),
    };
    let refund = if facts.paid {
        format!(
            " We refund your payment of {} in full; a separate mail confirms it.",
            format_price(facts.total_minor, &facts.currency)
        )
    } else {
        String::new()
    };
    (
        format!("Order cancelled: {}", facts.event_title),
        format!(
            "{why}: {quantity} × {ticket_type} for {title} on {when}. Its tickets are no longer \
             valid.{refund}\n\n\
             Your order: {link}\n",
            quantity = facts.quantity,
            ticket_type = facts.ticket_type,
            title = facts.event_title,
            when = facts.zone.format(facts.starts_at),
        ),
    )
}
