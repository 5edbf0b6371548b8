//! The mailer: sends each confirmed order its tickets (a PDF, the QR codes
//! inline, a calendar entry: `order_mail`), each cancelled order a word
//! saying so, each held order its confirmation link, each new place on a
//! waiting list its link to confirm the address, each refund its notice;
//! and the mails asked for outside the outbox (`requests`: "find my
//! tickets", an organizer's resend).
//!
//! It is a consumer of the transactional outbox (like the AMQP relay and
//! the webhook fan-out), so a mail is asked for exactly when the hold
//! committed, and a crash before the mail went out only delays it. Rounds,
//! in every instance (one at a time holds the cursor):
//! 1. lock the `mail` cursor and read the rows after it;
//! 2. for each row that asks for a mail (`message::mail_of`) not yet in
//!    `mail_sent`: read the order as it is now where the mail is about it
//!    (a ticket mail for an order cancelled meanwhile is not sent), rebuild
//!    its token from the order id, or the waiting list place's id
//!    (`domain::ConfirmKey`), send the mail (or, without SMTP, log it),
//!    several at once (the orders and `mail_sent` are read for the whole
//!    round in two statements), and record each in `mail_sent` as soon as
//!    it is accepted (`records`: one commit for those accepted meanwhile);
//! 3. move the cursor past what was handled, and commit.
//!
//! A mail the SMTP server could not take now (a 4xx answer, a lost
//! connection) stops the round there; the round is tried again after a
//! back-off. A mail it refuses for good (5xx) is logged and skipped.
//! A crash between the server's acceptance and step
//! 2's record is the one way a mail can go twice (SMTP has no way to ask
//! whether it was sent); both copies carry the same `Message-ID`, built
//! from the outbox message, so mail clients show one.

use std::{
    collections::{HashMap, HashSet},
    sync::atomic::{AtomicBool, Ordering},
};

mod message;
mod order_mail;
mod records;
mod requests;
mod settings;
mod transport;

use futures_util::{StreamExt as _, stream};
use lettre::Message;
use sqlx::{PgPool, Postgres, Transaction};
use time::OffsetDateTime;
use tokio::task::JoinHandle;
use uuid::Uuid;

use self::{
    message::{About, Mail, mail_of, message},
    order_mail::MailBuildError,
    records::{Record, RecordError, Records},
    transport::{Transport, deliver},
};
pub use self::{
    order_mail::{Documents, OrderFacts, facts as order_facts, render as render_documents},
    requests::{ask_lookup, ask_resend},
    settings::MailSettings,
};
use crate::{
    db::{
        self,
        outbox::{Consumer, OutboxRow},
    },
    domain::{ConfirmKey, OrderId, OrganizerId, WaitlistEntryId},
};

/// Check the settings and start the mailer on the current tokio runtime;
/// it runs until aborted.
pub fn spawn(
    db: PgPool,
    key: ConfirmKey,
    settings: MailSettings,
) -> Result<JoinHandle<()>, String> {
    let transport = Transport::new(&settings)?;
    if matches!(transport, Transport::Log) {
        tracing::warn!(
            "no --smtp-url: nothing is mailed (tickets, confirmation links, notices); the links \
             are logged instead (for development only)"
        );
    }
    Ok(tokio::spawn(run(db, key, settings, transport)))
}

async fn run(db: PgPool, key: ConfirmKey, settings: MailSettings, transport: Transport) {
    let mut backoff = settings.poll;
    loop {
        let asked = requests::round(&db, &key, &settings, &transport).await;
        let outbox = round(&db, &key, &settings, &transport).await;
        match asked.and_then(|asked| outbox.map(|read| read.max(asked))) {
            Ok(read) if read as i64 >= settings.batch => {
                backoff = settings.poll;
                continue;
            }
            Ok(_) => backoff = settings.poll,
            Err(err) => {
                backoff = (backoff * 2).min(settings.backoff_max);
                tracing::warn!(error = %err, retry_in = ?backoff, "mailer round failed");
            }
        }
        tokio::time::sleep(backoff).await;
    }
}

#[derive(Debug, thiserror::Error)]
enum RoundError {
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[error("SMTP: {0}")]
    Smtp(String),
    #[error("recording a sent mail: {0}")]
    Record(#[from] RecordError),
    /// Not started: an earlier mail of the round failed.
    #[error("postponed after an earlier failure")]
    Postponed,
}

/// One round; returns how many outbox rows it read. What it needs from
/// the database it reads in two statements for all its rows (the orders as
/// they are now, and which mails went already); its mails go out
/// [`MailSettings::concurrency`] at a time (lettre's pool gives each its
/// own connection), each recorded in `mail_sent` as soon as the server
/// took it; the cursor moves past the longest run of rows that were
/// handled, so a mail that failed is tried again in the next round, and
/// the ones after it that did go out are skipped then.
async fn round(
    db: &PgPool,
    key: &ConfirmKey,
    settings: &MailSettings,
    transport: &Transport,
) -> Result<usize, RoundError> {
    let mut tx = db.begin().await?;
    let rows = db::outbox::read_after_cursor(&mut tx, Consumer::Mail, settings.batch).await?;
    let mails: Vec<Option<Mail>> = rows.iter().map(mail_of).collect();
    let order_ids: Vec<OrderId> = mails
        .iter()
        .flatten()
        .filter(|mail| mail.needs_the_order())
        .filter_map(Mail::order_id)
        .collect();
    let mut facts: HashMap<OrderId, OrderFacts> = HashMap::new();
    if !order_ids.is_empty() {
        for order in order_mail::facts_of(&mut *tx, &order_ids).await? {
            facts.insert(order.order_id, order);
        }
    }
    let asked: Vec<Uuid> = rows
        .iter()
        .zip(&mails)
        .filter_map(|(row, mail)| mail.as_ref().map(|_| row.id))
        .collect();
    let sent: HashSet<Uuid> = if asked.is_empty() {
        HashSet::new()
    } else {
        sqlx::query_scalar!(
            "SELECT message_id FROM mail_sent WHERE message_id = ANY($1)",
            &asked
        )
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .collect()
    };
    // Once one mail fails, the ones not yet started wait for the next
    // round: an unreachable server costs one wave of timeouts, not the
    // whole round's.
    let failed = AtomicBool::new(false);
    let records = Records::default();
    let ctx = Round {
        db,
        key,
        settings,
        transport,
        records: &records,
    };
    let sends: Vec<_> = rows
        .iter()
        .zip(mails)
        .map(|(row, mail)| {
            let to_send = mail
                .filter(|_| !sent.contains(&row.id))
                .and_then(|mail| with_the_order(mail, &facts));
            handle(ctx, row, to_send, &failed)
        })
        .collect();
    let outcomes: Vec<Result<(), RoundError>> = stream::iter(sends)
        .buffered(settings.concurrency.max(1))
        .collect()
        .await;
    let mut handled: Option<&OutboxRow> = None;
    let mut failure = None;
    for (row, outcome) in rows.iter().zip(outcomes) {
        if let Err(err) = outcome {
            failure = Some(err);
            break;
        }
        handled = Some(row);
    }
    finish(tx, handled).await?;
    match failure {
        Some(err) => Err(err),
        None => Ok(rows.len()),
    }
}

/// The mail with what it needs of its order as it is now, or `None` where
/// it is not to be sent: tickets of an order that no longer has them, or a
/// mail about an order that does not exist.
fn with_the_order(
    mut mail: Mail,
    facts: &HashMap<OrderId, OrderFacts>,
) -> Option<(Mail, Option<OrderFacts>)> {
    let Some(order_id) = mail.order_id().filter(|_| mail.needs_the_order()) else {
        return Some((mail, None));
    };
    match facts.get(&order_id) {
        // Tickets only for an order that still has them.
        Some(order)
            if matches!(mail.about, About::Tickets { .. }) && order.status != "confirmed" =>
        {
            None
        }
        Some(order) => {
            mail.email = order.email.clone();
            mail.zone = Some(order.zone.clone());
            // With a price that Stripe takes, a hold's link leads to paying.
            mail.set_paid_through_stripe(mail.is_priced_hold() && order.takes_payment);
            Some((mail, Some(order.clone())))
        }
        // A hold's row carries what its mail needs.
        None if matches!(mail.about, About::Hold { .. }) => Some((mail, None)),
        None => None,
    }
}

/// What every send of a round shares.
#[derive(Clone, Copy)]
struct Round<'a> {
    db: &'a PgPool,
    key: &'a ConfirmKey,
    settings: &'a MailSettings,
    transport: &'a Transport,
    records: &'a Records,
}

/// Send one row's mail, if it has one to send, and record it.
async fn handle(
    round: Round<'_>,
    row: &OutboxRow,
    to_send: Option<(Mail, Option<OrderFacts>)>,
    failed: &AtomicBool,
) -> Result<(), RoundError> {
    let Some((mail, facts)) = to_send else {
        return Ok(());
    };
    if failed.load(Ordering::Relaxed) {
        return Err(RoundError::Postponed);
    }
    let sent = send(round, row, &mail, facts).await;
    if sent.is_err() {
        failed.store(true, Ordering::Relaxed);
    }
    sent
}

async fn finish(
    mut tx: Transaction<'_, Postgres>,
    handled: Option<&OutboxRow>,
) -> Result<(), sqlx::Error> {
    if let Some(last) = handled {
        db::outbox::move_cursor(&mut tx, Consumer::Mail, last).await?;
    }
    tx.commit().await
}

/// Send the row's mail and record it in `mail_sent` as soon as the server
/// took it, returning once the record is committed (`records`): a crash
/// then sends again at most the mails in flight.
async fn send(
    Round {
        key,
        settings,
        transport,
        db,
        records,
    }: Round<'_>,
    row: &OutboxRow,
    mail: &Mail,
    facts: Option<OrderFacts>,
) -> Result<(), RoundError> {
    let link = mail.link(key, &settings.public_url);
    if matches!(transport, Transport::Log) {
        tracing::info!(order_id = ?mail.order_id(), entry_id = ?mail.entry_id(), %link,
            "mail link (no SMTP configured)");
    }
    let (owned, id) = (settings.clone(), row.id);
    let build: Box<dyn FnOnce() -> Result<Option<Message>, MailBuildError> + Send> =
        match (&mail.about, facts) {
            (About::Tickets { .. }, Some(facts)) => Box::new(move || {
                order_mail::tickets_message(&owned, id, &facts, &link, OffsetDateTime::now_utc())
            }),
            (About::Cancelled { reason, .. }, Some(facts)) => {
                let (subject, body) = order_mail::cancelled_text(&facts, reason, &link);
                let to = facts.email;
                Box::new(move || Ok(message::plain_message(&owned, id, &to, &subject, body)))
            }
            _ => {
                let built = message(settings, row.id, mail, &link);
                Box::new(move || Ok(built))
            }
        };
    if !deliver(transport, row.id, &mail.email, build).await? {
        return Ok(());
    }
    let record = Record {
        message_id: row.id,
        order_id: mail.order_id().map(OrderId::get),
        waitlist_entry_id: mail.entry_id().map(WaitlistEntryId::get),
        recipient: mail.email.clone(),
    };
    records.record(db, record).await?;
    Ok(())
}

/// The order page's link with the order's mailed token
/// ([`ConfirmKey::token`]): it shows the tickets to whoever has the mailbox.
pub(crate) fn order_link(key: &ConfirmKey, public_url: &str, order_id: OrderId) -> String {
    format!(
        "{public_url}/orders/{order_id}?t={}",
        key.token(order_id).as_str()
    )
}

/// The link of the mail that confirms a new organizer's address.
pub(crate) fn organizer_link(key: &ConfirmKey, public_url: &str, id: OrganizerId) -> String {
    format!(
        "{public_url}/account/confirm-email/{id}?t={}",
        key.organizer_token(id).as_str()
    )
}
