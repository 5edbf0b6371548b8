//! What a mail says: the mail an outbox row asks for, its link (with the
//! token rebuilt from the confirmation key), its words, and the message
//! as sent.

use lettre::{
    Message,
    message::{
        Body, Mailbox, SinglePart,
        header::{ContentTransferEncoding, ContentType},
    },
};
use time::OffsetDateTime;
use uuid::Uuid;

use super::MailSettings;
use crate::{
    db::outbox::OutboxRow,
    domain::{ConfirmKey, OrderId, WaitlistEntryId, Zone, format_price, format_time},
};

/// A mail that an outbox row asks for.
pub(super) struct Mail {
    /// From the row; for the mails about an order as it is now, from the
    /// order when it is sent ([`Mail::needs_the_order`]).
    pub(super) email: String,
    pub(super) about: About,
    /// The event's, once the order is read: the times read in it.
    pub(super) zone: Option<Zone>,
}

pub(super) enum About {
    /// A held order: its confirmation link. An offer from a waiting list is
    /// one too; its order was given the place's token (`offer_to`).
    Hold {
        order_id: OrderId,
        hold_expires_at: Option<OffsetDateTime>,
        offer_to: Option<WaitlistEntryId>,
        /// Its tickets have a price ...
        priced: bool,
        /// ... that Stripe takes: the link leads to the payment.
        pays: bool,
    },
    /// A new place on a waiting list: the link confirms the address.
    Place { entry_id: WaitlistEntryId },
    /// A confirmed order: its tickets.
    Tickets { order_id: OrderId },
    /// An order cancelled, and by whom (its row's `reason`).
    Cancelled { order_id: OrderId, reason: String },
    /// A payment given back in full, and why.
    Refund {
        order_id: OrderId,
        amount: String,
        reason: String,
    },
}

fn entry_id_in(payload: &serde_json::Value) -> Option<WaitlistEntryId> {
    WaitlistEntryId::parse(payload.get("waitlist_entry_id")?.as_str()?)
}

pub(super) fn mail_of(row: &OutboxRow) -> Option<Mail> {
    let email = row
        .payload
        .get("email")
        .and_then(|email| email.as_str())
        .unwrap_or_default()
        .to_owned();
    let about = match row.kind.as_str() {
        // Sold at once, or confirmed from a hold, a payment or a waiting
        // list's offer: each confirmation is one row of these.
        "order.created" if row.payload.get("status")?.as_str()? == "confirmed" => About::Tickets {
            order_id: OrderId::from(row.order_id?),
        },
        "order.confirmed" => About::Tickets {
            order_id: OrderId::from(row.order_id?),
        },
        "order.cancelled" => About::Cancelled {
            order_id: OrderId::from(row.order_id?),
            reason: row.payload.get("reason")?.as_str()?.to_owned(),
        },
        "order.created" if row.payload.get("status")?.as_str()? == "held" => About::Hold {
            order_id: OrderId::from(row.order_id?),
            hold_expires_at: row
                .payload
                .get("hold_expires_at")
                .and_then(|at| at.as_str())
                .and_then(|at| {
                    OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339).ok()
                }),
            offer_to: entry_id_in(&row.payload),
            priced: row
                .payload
                .get("unit_price_minor")
                .and_then(serde_json::Value::as_i64)
                .is_some_and(|price| price > 0),
            pays: false,
        },
        "waitlist.joined" => About::Place {
            entry_id: entry_id_in(&row.payload)?,
        },
        "order.refunded" => About::Refund {
            order_id: OrderId::from(row.order_id?),
            amount: format_price(
                row.payload.get("amount_minor")?.as_i64()?,
                row.payload.get("currency")?.as_str()?,
            ),
            reason: row.payload.get("reason")?.as_str()?.to_owned(),
        },
        _ => return None,
    };
    let mail = Mail {
        email,
        about,
        zone: None,
    };
    (mail.needs_the_order() || !mail.email.is_empty()).then_some(mail)
}

impl Mail {
    /// Read the order when the mail goes: its address, its event's zone,
    /// and whether it is still what the mail says.
    pub(super) fn needs_the_order(&self) -> bool {
        matches!(
            self.about,
            About::Hold { .. } | About::Tickets { .. } | About::Cancelled { .. }
        )
    }

    /// The link the mail carries, with its token rebuilt from the key.
    pub(super) fn link(&self, key: &ConfirmKey, public_url: &str) -> String {
        match &self.about {
            About::Tickets { order_id } | About::Cancelled { order_id, .. } => {
                super::order_link(key, public_url, *order_id)
            }
            About::Hold {
                order_id,
                offer_to: None,
                ..
            } => format!(
                "{public_url}/orders/{order_id}/confirm?t={}",
                key.token(*order_id).as_str()
            ),
            About::Hold {
                order_id,
                offer_to: Some(entry_id),
                ..
            } => format!(
                "{public_url}/orders/{order_id}/confirm?t={}",
                key.waitlist_token(*entry_id).as_str()
            ),
            About::Place { entry_id } => format!(
                "{public_url}/waiting-list/{entry_id}/confirm?t={}",
                key.waitlist_token(*entry_id).as_str()
            ),
            About::Refund { order_id, .. } => super::order_link(key, public_url, *order_id),
        }
    }

    /// A held order whose tickets have a price: who takes it decides the
    /// words ([`Self::set_paid_through_stripe`]).
    pub(super) fn is_priced_hold(&self) -> bool {
        matches!(self.about, About::Hold { priced: true, .. })
    }

    pub(super) fn set_paid_through_stripe(&mut self, takes_payment: bool) {
        if let About::Hold { pays, .. } = &mut self.about {
            *pays = takes_payment;
        }
    }

    pub(super) fn order_id(&self) -> Option<OrderId> {
        match self.about {
            About::Hold { order_id, .. }
            | About::Refund { order_id, .. }
            | About::Tickets { order_id }
            | About::Cancelled { order_id, .. } => Some(order_id),
            About::Place { .. } => None,
        }
    }

    pub(super) fn entry_id(&self) -> Option<WaitlistEntryId> {
        match self.about {
            About::Hold { offer_to, .. } => offer_to,
            About::Place { entry_id } => Some(entry_id),
            About::Refund { .. } | About::Tickets { .. } | About::Cancelled { .. } => None,
        }
    }

    /// Subject and body.
    fn text(&self, link: &str) -> (&'static str, String) {
        match &self.about {
            About::Hold {
                hold_expires_at,
                offer_to,
                pays,
                ..
            } => {
                let until = hold_expires_at
                    .map(|at| match &self.zone {
                        Some(zone) => format!(" before {}", zone.format(at)),
                        None => format!(" before {}", format_time(at)),
                    })
                    .unwrap_or_default();
                if offer_to.is_some() {
                    (
                        "Tickets came back for you",
                        format!(
                            "Tickets came back, and you were next on the waiting list: they are \
                             held for you. Confirm your order{until} to get them:\n\n\
                             {link}\n\n\
                             If you no longer want them, ignore this mail: the hold ends by \
                             itself and the tickets go to the next person in line.\n"
                        ),
                    )
                } else {
                    // With a price that Stripe takes, the link leads to the
                    // pay page (`web::pages::confirm_page`).
                    let paying = if *pays {
                        " Pay for them to confirm your order: the link leads to the payment."
                    } else {
                        ""
                    };
                    (
                        "Confirm your tickets",
                        format!(
                            "Your tickets are held for you.{paying} Confirm your order{until} to get them:\n\n\
                             {link}\n\n\
                             If you did not order tickets, ignore this mail: the hold ends by itself \
                             and nothing is charged.\n"
                        ),
                    )
                }
            }
            About::Refund { amount, reason, .. } => {
                let why = match reason.as_str() {
                    "late_sold_out" => {
                        "Your payment reached us after your hold had ended, and the tickets had \
                         gone to other buyers meanwhile, so there is no ticket for it."
                    }
                    "event_cancelled" => "The organizer cancelled the event.",
                    _ => "Your order was cancelled.",
                };
                (
                    "Your payment was refunded",
                    format!(
                        "{why} We have refunded your payment of {amount} in full to the card \
                         you paid with; your bank shows it within a few days.\n\n\
                         Your order: {link}\n"
                    ),
                )
            }
            // Built from the order as it is now (order_mail.rs).
            About::Tickets { .. } | About::Cancelled { .. } => ("", String::new()),
            About::Place { .. } => (
                "Confirm your place on the waiting list",
                format!(
                    "Confirm your address to take your place on the waiting list:\n\n\
                     {link}\n\n\
                     When tickets come back, the first person in line gets them, held for a \
                     few minutes, and a mail like this one. If you did not ask for this, \
                     ignore this mail: without the confirmation there is no place.\n"
                ),
            ),
        }
    }
}

pub(super) fn message(
    settings: &MailSettings,
    message_id: Uuid,
    mail: &Mail,
    link: &str,
) -> Option<Message> {
    let (subject, body) = mail.text(link);
    plain_message(settings, message_id, &mail.email, subject, body)
}

/// Put together a plain text mail.
pub(super) fn plain_message(
    settings: &MailSettings,
    message_id: Uuid,
    email: &str,
    subject: &str,
    body: String,
) -> Option<Message> {
    let to = email.parse::<Mailbox>().ok()?;
    Message::builder()
        .from(settings.from.clone())
        .to(to)
        .subject(subject)
        .message_id(Some(format!("<{message_id}@stampede>")))
        .singlepart(
            SinglePart::builder()
                .header(ContentType::TEXT_PLAIN)
                .body(plain_body(body)),
        )
        .ok()
}

/// The body as 7bit when it is plain ASCII in lines of under 998
/// characters (RFC 5322), so that the link stays one line that any reader
/// can follow; the mail library would pick quoted-printable for lines over
/// 76 characters, splitting the link. Otherwise the library chooses.
pub(super) fn plain_body(text: String) -> Body {
    let fits = text.is_ascii() && !text.contains('\r') && text.lines().all(|line| line.len() < 998);
    if fits {
        let crlf = text.replace('\n', "\r\n");
        Body::dangerous_pre_encoded(crlf.into_bytes(), ContentTransferEncoding::SevenBit)
    } else {
        Body::new(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_body_keeps_its_long_link_on_one_line() {
        let link = format!(
            "https://tickets.example.org/orders/{}/confirm?t={}",
            Uuid::nil(),
            "a".repeat(43)
        );
        let body = plain_body(format!("Confirm:\n\n{link}\n"));
        assert_eq!(body.encoding(), ContentTransferEncoding::SevenBit);
        let text = String::from_utf8(body.into_vec()).unwrap();
        assert_eq!(text, format!("Confirm:\r\n\r\n{link}\r\n"));
        // Not plain ASCII: the library's own choice.
        let body = plain_body("Bestätigen\n".to_owned());
        assert_ne!(body.encoding(), ContentTransferEncoding::SevenBit);
    }

    #[test]
    fn held_orders_and_new_places_on_a_waiting_list_ask_for_a_mail() {
        let row = |kind: &str, status: &str| OutboxRow {
            xid: 1,
            position: 1,
            id: Uuid::new_v4(),
            kind: kind.to_owned(),
            event_id: Uuid::new_v4(),
            order_id: Some(Uuid::new_v4()),
            ticket_type_id: None,
            sequence: 1,
            payload: serde_json::json!({
                "status": status, "email": "a@b.test",
                "hold_expires_at": "2027-01-01T10:00:00Z",
            }),
            created_at: OffsetDateTime::UNIX_EPOCH,
        };
        let mail = mail_of(&row("order.created", "held")).unwrap();
        assert_eq!(mail.email, "a@b.test");
        assert!(matches!(
            mail.about,
            About::Hold {
                hold_expires_at: Some(_),
                offer_to: None,
                ..
            }
        ));
        // A confirmation asks for the tickets' mail, whichever row says it.
        for (kind, status) in [
            ("order.created", "confirmed"),
            ("order.confirmed", "confirmed"),
        ] {
            let mail = mail_of(&row(kind, status)).unwrap();
            assert!(matches!(mail.about, About::Tickets { .. }), "{kind}");
            assert!(mail.needs_the_order());
        }
        assert!(mail_of(&row("order.expired", "cancelled")).is_none());
        let mut cancelled = row("order.cancelled", "cancelled");
        cancelled.payload = serde_json::json!({"reason": "organizer"});
        assert!(matches!(
            mail_of(&cancelled).unwrap().about,
            About::Cancelled { ref reason, .. } if reason == "organizer"
        ));
        // A place on a waiting list asks for its own mail, with its own link.
        let mut joined = row("waitlist.joined", "");
        let entry = Uuid::new_v4();
        joined.payload["waitlist_entry_id"] = serde_json::json!(entry);
        let mail = mail_of(&joined).unwrap();
        let key = ConfirmKey::random();
        let link = mail.link(&key, "https://x.test");
        assert_eq!(
            link,
            format!(
                "https://x.test/waiting-list/{entry}/confirm?t={}",
                key.waitlist_token(WaitlistEntryId::from(entry)).as_str()
            )
        );
    }
}
