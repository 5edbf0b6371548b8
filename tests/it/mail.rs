//! The mailer (`src/mail/`) against real Postgres and a real SMTP server on
//! loopback: a round's mails go out several at once, each once however many
//! instances run a mailer, and an address the server refuses for good does
//! not hold up the others. Plus the mail throughput benchmark (ignored;
//! `scripts/bench-mail` runs it).

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::{collections::BTreeSet, time::Duration};

use common::{TicketSpec, pool, published_event, smtp::Sink};
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use stampede::{
    domain::ConfirmKey,
    mail::{self, MailSettings},
};
use uuid::Uuid;

/// One held order's `order.created` message per address, in this order, as
/// the sale writes them (the mailer needs no more than the message).
async fn ask_for_mails(pool: &PgPool, event_id: Uuid, emails: &[String]) {
    sqlx::query(
        "INSERT INTO outbox (kind, event_id, order_id, sequence, payload)
         SELECT 'order.created', $1, gen_random_uuid(), 1,
                jsonb_build_object('status', 'held', 'email', e,
                                   'hold_expires_at', '2030-01-01T00:00:00Z')
         FROM unnest($2::text[]) WITH ORDINALITY AS m(e, n) ORDER BY n",
    )
    .bind(event_id)
    .bind(emails)
    .execute(pool)
    .await
    .unwrap();
}

fn settings(sink: &Sink, concurrency: usize) -> MailSettings {
    let mut settings = MailSettings::new(
        Some(sink.url()),
        "Stampede <tickets@example.org>",
        "http://tickets.test",
    )
    .unwrap();
    settings.concurrency = concurrency;
    settings
}

/// Whether the mail cursor is past every message.
async fn all_handled(pool: &PgPool) -> bool {
    sqlx::query_scalar(
        "SELECT c.position >= (SELECT max(position) FROM outbox)
         FROM outbox_cursors c WHERE c.consumer = 'mail'",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

#[sqlx::test]
async fn mails_go_out_at_once_each_once_and_a_refused_address_holds_up_nobody(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 20).await;
    let fixture = published_event(&pool, &[TicketSpec::new(10, 1, 1)]).await;
    let sink = Sink::start_slow(Duration::from_millis(5)).await;
    let key = ConfirmKey::random();
    let mut emails: Vec<String> = (0..150).map(|i| format!("fan{i}@example.org")).collect();
    // Early in the log: a mailbox the server refuses for good (550).
    emails.insert(10, "nobody@example.org".to_owned());
    ask_for_mails(&pool, fixture.event_id, &emails).await;
    // Two instances' mailers at once.
    let mailers = [
        mail::spawn(pool.clone(), key.clone(), settings(&sink, 8)).unwrap(),
        mail::spawn(pool.clone(), key.clone(), settings(&sink, 8)).unwrap(),
    ];
    sink.wait_for(150, Duration::from_secs(60)).await;
    for _ in 0..100 {
        if all_handled(&pool).await {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(all_handled(&pool).await, "the cursor is past every message");
    // Time for a mail sent twice to arrive too.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mails = sink.mails();
    for mailer in mailers {
        mailer.abort();
    }
    // Each deliverable address got exactly one mail; the refused one none.
    assert_eq!(mails.len(), 150);
    let to: BTreeSet<String> = mails.iter().map(|m| m.to.join(",")).collect();
    assert_eq!(to.len(), 150);
    assert!(!to.contains("nobody@example.org"));
    let ids: BTreeSet<String> = mails
        .iter()
        .map(|m| m.header("Message-ID").unwrap())
        .collect();
    assert_eq!(ids.len(), 150);
    let recorded: i64 = sqlx::query_scalar("SELECT count(*) FROM mail_sent")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(recorded, 150);
}

/// The median of an odd number of runs.
fn median(runs: &[f64]) -> f64 {
    let mut runs = runs.to_vec();
    runs.sort_by(f64::total_cmp);
    runs[runs.len() / 2]
}

/// Mails per second from one mailer, `count` mails to an SMTP server that
/// takes 20 ms per mail (`STAMPEDE_BENCH_SMTP_MS`): one at a time (the mailer before this change)
/// against eight at once, alternating, three rounds each.
#[sqlx::test]
#[ignore = "benchmark: scripts/bench-mail"]
async fn mail_throughput_benchmark(_: PgPoolOptions, connect: PgConnectOptions) {
    let pool = pool(connect, 20).await;
    let fixture = published_event(&pool, &[TicketSpec::new(10, 1, 1)]).await;
    let key = ConfirmKey::random();
    let count = 300;
    // The server's own time per mail (ms).
    let per_mail: u64 = std::env::var("STAMPEDE_BENCH_SMTP_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .unwrap_or(20);
    let mut rates: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for round in 0..3 {
        for (which, concurrency) in [1_usize, 8].into_iter().enumerate() {
            let sink = Sink::start_slow(Duration::from_millis(per_mail)).await;
            let emails: Vec<String> = (0..count)
                .map(|i| format!("r{round}c{concurrency}n{i}@example.org"))
                .collect();
            let started = std::time::Instant::now();
            ask_for_mails(&pool, fixture.event_id, &emails).await;
            let mailer =
                mail::spawn(pool.clone(), key.clone(), settings(&sink, concurrency)).unwrap();
            let got = sink.wait_for(count, Duration::from_secs(120)).await.len();
            let rate = got as f64 / started.elapsed().as_secs_f64();
            // Stop the mailer only once its last round has moved the
            // cursor: one stopped between a mail's acceptance and its
            // record would send that mail again, to the next round's sink.
            while !all_handled(&pool).await {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            mailer.abort();
            assert_eq!(got, count);
            println!("round {round}: concurrency {concurrency}: {rate:.0} mails/s");
            rates[which].push(rate);
        }
    }
    let (one, eight) = (median(&rates[0]), median(&rates[1]));
    println!(
        "server {per_mail} ms per mail; medians of 3: one at a time {one:.0} mails/s, eight at once {eight:.0} mails/s, ratio {:.2}",
        eight / one
    );
}
