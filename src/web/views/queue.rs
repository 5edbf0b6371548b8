//! The waiting room's pages: the panel on a queued event's page, and the
//! position page.

use maud::{Markup, html};

use super::{PageContext, csrf_field, event_time, layout_refreshing};
use crate::{
    domain::{EventId, Zone},
    waiting_room::Room,
    web::assets,
};

/// What the position page shows (per buyer: never cached).
#[derive(Debug)]
pub struct Position<'a> {
    pub state: &'a str,
    pub place: Option<i64>,
    pub ahead: Option<i64>,
    pub estimated_wait_secs: Option<i64>,
    pub in_prequeue: bool,
    pub commitment: &'a str,
    pub seed: Option<&'a str>,
    pub rule: &'a str,
}

fn wait_in_words(secs: i64) -> String {
    match secs {
        s if s < 60 => "under a minute".to_owned(),
        s if s < 120 => "about a minute".to_owned(),
        s => format!("about {} minutes", s / 60),
    }
}

pub fn position(
    ctx: &PageContext,
    event_id: EventId,
    p: &Position<'_>,
    refresh_secs: u32,
) -> Markup {
    let refresh = (p.state == "waiting").then_some(refresh_secs);
    layout_refreshing(
        ctx,
        "Your place in the queue",
        refresh,
        html! {
            article.queue {
                h1 { "Your place in the queue" }
                @match p.state {
                    "admitted" => {
                        p.notice role="status" { "It is your turn. You can buy now." }
                        p { a.button href={ "/events/" (event_id) } { "Go to the tickets" } }
                    },
                    "done" => p.notice { "Your turn is over (your pass was used or has expired). Join the queue again from the event page if tickets are left." },
                    _ => {
                        @if let (Some(place), Some(ahead)) = (p.place, p.ahead) {
                            p.place role="status" { "You are number " strong { (place) } " in the queue; " (ahead) " ahead of you." }
                            @if let Some(secs) = p.estimated_wait_secs {
                                p { "Estimated wait: " (wait_in_words(secs)) "." }
                            }
                        } @else {
                            p.place role="status" { "You are in the pre-queue. When the sale opens, everyone in it gets a random place; this page then shows yours." }
                        }
                        p.hint { "This page refreshes itself; keep it open. Opening it in another tab does not give you a second place." }
                    }
                }
                section.fairness {
                    h2 { "How the order is decided" }
                    p { (p.rule) }
                    p { "Commitment (SHA-256 of the seed): " code { (p.commitment) } }
                    @if let Some(seed) = p.seed {
                        p { "Seed: " code { (seed) } " · " a href={ "/events/" (event_id) "/queue/prequeue.json" } { "the pre-queue's entry ids" } }
                    }
                    @if p.in_prequeue { p { "You joined the pre-queue." } }
                }
            }
        },
    )
}

/// The panel on a queued event's page, for a buyer without a pass: the
/// join button, the commitment, the seed once revealed.
pub fn panel(
    ctx: &PageContext,
    room: &Room,
    zone: &Zone,
    can_join: bool,
    in_queue: bool,
) -> Markup {
    let event_id = room.event_id;
    html! {
        section.waiting-room.card {
            h2 { "Waiting room" }
            p { "This sale has a waiting room: join the queue, and buy when it is your turn. Joining before the sale opens puts you in the pre-queue, which is shuffled at random at the opening; after that, it is first come, first served." }
            @if in_queue {
                p { a.button href={ "/events/" (event_id) "/queue" } { "See your place in the queue" } }
            } @else if can_join {
                // static/app.js asks for a challenge, has the Web Worker
                // (static/proof-worker.js) solve it, fills `proof` and
                // submits; without a proof the server refuses to join.
                form.join method="post" action={ "/events/" (event_id) "/queue" } data-once
                    data-proof-challenge={ "/api/v1/events/" (event_id) "/queue/challenge" }
                    data-proof-worker=(assets::url("proof-worker.js")) {
                    (csrf_field(ctx))
                    input type="hidden" name="proof" value="";
                    button type="submit" { "Join the queue" }
                    p.hint.proof-status role="status" aria-live="polite" {}
                }
                noscript {
                    p.notice.no-script { "Joining this queue needs JavaScript. Your browser solves a small puzzle (about a second of work) before it joins, so that scripts cannot take thousands of places. Turn JavaScript on for this site, then reload this page." }
                }
            } @else {
                p.notice { "The queue opens " (event_time(zone, room.prequeue_opens_at())) "." }
            }
            p.commitment { "Commitment (SHA-256 of the shuffle's seed): " code { (room.commitment_hex()) } }
            @if let Some(seed) = room.revealed_seed_hex() {
                p { "Seed: " code { (seed) } " · " a href={ "/events/" (event_id) "/queue/prequeue.json" } { "the pre-queue's entry ids" } }
            }
        }
    }
}
