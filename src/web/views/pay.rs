//! The pay page: what is paid for, how much, until when; Stripe.js's card
//! field, which talks to Stripe directly (card data never reaches us).

use maud::{Markup, html};
use time::OffsetDateTime;

use super::{layout, rfc3339};
use crate::{
    domain::{Zone, format_price},
    web::extract::PageContext,
};

pub struct PayPage<'a> {
    pub event_title: &'a str,
    pub ticket_type_name: &'a str,
    pub quantity: i32,
    pub total_minor: i64,
    pub currency: &'a str,
    pub hold_expires_at: Option<OffsetDateTime>,
    /// The event's: the hold's end reads in it.
    pub zone: &'a Zone,
    pub publishable_key: &'a str,
    pub client_secret: &'a str,
    pub js_url: &'a str,
    /// Where the buyer lands after paying (the order, with its proof).
    pub return_url: &'a str,
}

pub fn page(ctx: &PageContext, pay: &PayPage<'_>, now: OffsetDateTime) -> Markup {
    layout(
        ctx,
        "Pay for your tickets",
        html! {
            article.card {
                h1 { "Pay for your tickets" }
                dl {
                    dt { "Event" } dd { (pay.event_title) }
                    dt { "Tickets" } dd { (pay.quantity) " × " (pay.ticket_type_name) }
                    dt { "To pay" } dd { strong { (format_price(pay.total_minor, pay.currency)) } }
                    @if let Some(at) = pay.hold_expires_at {
                        dt { "Held until" }
                        dd {
                            time datetime=(rfc3339(at)) data-countdown
                                data-server-now=(now.unix_timestamp_nanos() / 1_000_000) { (pay.zone.format(at)) }
                        }
                    }
                }
                form #pay-form
                    data-publishable-key=(pay.publishable_key)
                    data-client-secret=(pay.client_secret)
                    data-return-url=(pay.return_url) {
                    label for="card-element" { "Card" }
                    div #card-element {}
                    p #pay-error.error role="alert" {}
                    button #pay-button type="submit" { "Pay " (format_price(pay.total_minor, pay.currency)) }
                }
                p.hint {
                    "Your card details go to Stripe, our payment provider, and never to us. "
                    "Your tickets are confirmed as soon as Stripe tells us the payment went through."
                }
                noscript { p.notice { "Paying by card needs JavaScript on this page." } }
                script src=(pay.js_url) {}
                script src=(crate::web::assets::url("pay.js")) defer {}
            }
        },
    )
}
