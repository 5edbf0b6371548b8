//! Ticket mails under a rush: 1,000 orders confirmed in one burst, the
//! mailer killed in the middle and started again; every confirmed order's
//! buyer gets its tickets once. Plus the benchmark of the mailer with its
//! PDFs beside the sale (ignored; `scripts/bench-ticket-mail` runs it).

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use mail_parser::MessageParser;
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use stampede::{
    domain::ConfirmKey,
    mail::{self, MailSettings},
};
use uuid::Uuid;

use crate::common::{
    TicketSpec, assert_invariants,
    holds::{burst, engine},
    now, pool, published_event,
    smtp::{Mail, Sink},
};

const PUBLIC: &str = "http://tickets.test";

fn settings(sink: &Sink) -> MailSettings {
    MailSettings::new(Some(sink.url()), "Stampede <tickets@example.org>", PUBLIC).unwrap()
}

/// The order a ticket mail is about (from the link in its text part).
fn order_of(mail: &Mail) -> Uuid {
    let message = MessageParser::default()
        .parse(mail.data.as_bytes())
        .unwrap();
    let text = message.body_text(0).unwrap();
    let link = text
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{PUBLIC}/orders/")))
        .expect("the order's link");
    link[..36].parse().unwrap()
}

async fn confirmed_orders(pool: &PgPool) -> BTreeSet<Uuid> {
    sqlx::query_scalar("SELECT id FROM orders WHERE status = 'confirmed'")
        .fetch_all(pool)
        .await
        .unwrap()
        .into_iter()
        .collect()
}

#[sqlx::test]
async fn every_order_of_a_rush_is_mailed_once_with_the_mailer_killed_in_the_middle(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 30).await;
    let fixture = published_event(&pool, &[TicketSpec::new(1000, 1, 1)]).await;
    let key = ConfirmKey::random();
    // A server that takes a few milliseconds a mail: the rush outlasts the
    // first mailer.
    let sink = Sink::start_slow(Duration::from_millis(3)).await;
    let first = mail::spawn(pool.clone(), key.clone(), settings(&sink)).unwrap();
    // 1,200 buyers for 1,000 tickets, all at once.
    let (orders, sold_out) = burst(
        &engine(&pool, &key),
        fixture.ticket_type_id(),
        now(),
        "fan",
        1200,
    )
    .await;
    assert_eq!((orders.len(), sold_out), (1000, 200));
    // Killed (aborted at whatever await it was in: between the server's
    // acceptance and its record, too) once some mails are out.
    sink.wait_for(200, Duration::from_secs(120)).await;
    first.abort();
    let killed_after = sink.mails().len();
    assert!(
        killed_after < 1000,
        "the mailer was killed before the end ({killed_after})"
    );
    let second = mail::spawn(pool.clone(), key.clone(), settings(&sink)).unwrap();
    sink.wait_for(1000, Duration::from_secs(180)).await;
    // Time for anything sent twice to arrive.
    tokio::time::sleep(Duration::from_secs(2)).await;
    second.abort();

    let mails = sink.mails();
    let mut per_order: BTreeMap<Uuid, BTreeSet<String>> = BTreeMap::new();
    for mail in &mails {
        per_order
            .entry(order_of(mail))
            .or_default()
            .insert(mail.header("Message-ID").unwrap());
    }
    // Every confirmed order reached its buyer, each as one message: a copy
    // sent again after the kill carries the same Message-ID (a mail client
    // shows one), and there are at most as many copies as mails were in
    // flight when it was killed.
    let confirmed = confirmed_orders(&pool).await;
    assert_eq!(confirmed.len(), 1000);
    assert_eq!(
        per_order.keys().cloned().collect::<BTreeSet<_>>(),
        confirmed
    );
    assert!(
        per_order.values().all(|ids| ids.len() == 1),
        "one message per order"
    );
    let copies = mails.len() - per_order.len();
    println!("killed after {killed_after} mails; {copies} sent again after the kill");
    assert!(
        copies <= 8,
        "{copies} copies: more than the mails in flight"
    );
    let recorded: i64 = sqlx::query_scalar("SELECT count(*) FROM mail_sent")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(recorded, 1000);
    assert_invariants(&pool).await;
}

/// The median of an odd number of runs.
fn median(runs: &[f64]) -> f64 {
    let mut runs = runs.to_vec();
    runs.sort_by(f64::total_cmp);
    runs[runs.len() / 2]
}

/// The sale's committed orders/s in a burst of `count` buyers with the
/// mailer off, against the same burst with the mailer on (sending each
/// order its tickets, PDF and all, to a loopback server that takes no time
/// of its own), alternating, three rounds each; and the mailer's mails/s
/// from the first commit to the last mail.
#[sqlx::test]
#[ignore = "benchmark: scripts/bench-ticket-mail"]
async fn ticket_mail_benchmark(_: PgPoolOptions, connect: PgConnectOptions) {
    let pool = pool(connect, 30).await;
    let key = ConfirmKey::random();
    let count: usize = std::env::var("STAMPEDE_BENCH_ORDERS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2000);
    let (mut off, mut on, mut mailed) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..3 {
        for with_mailer in [false, true] {
            let fixture = published_event(&pool, &[TicketSpec::new(count as i64, 1, 1)]).await;
            let sink = Sink::start().await;
            let mailer = with_mailer
                .then(|| mail::spawn(pool.clone(), key.clone(), settings(&sink)).unwrap());
            let started = Instant::now();
            let (orders, _) = burst(
                &engine(&pool, &key),
                fixture.ticket_type_id(),
                now(),
                &format!("r{round}{with_mailer}-"),
                count,
            )
            .await;
            let sale = started.elapsed().as_secs_f64();
            assert_eq!(orders.len(), count);
            let rate = count as f64 / sale;
            if let Some(mailer) = mailer {
                sink.wait_for(count, Duration::from_secs(600)).await;
                let mails = count as f64 / started.elapsed().as_secs_f64();
                mailer.abort();
                println!(
                    "round {round}: mailer on:  {rate:.0} orders/s committed, {mails:.0} mails/s"
                );
                on.push(rate);
                mailed.push(mails);
            } else {
                println!("round {round}: mailer off: {rate:.0} orders/s committed");
                off.push(rate);
            }
            // The next round's mailer starts after this round's mails.
            sqlx::query(
                "UPDATE outbox_cursors c SET xid = o.xid, position = o.position
                 FROM (SELECT xid, position FROM outbox ORDER BY xid DESC, position DESC LIMIT 1) o
                 WHERE c.consumer = 'mail'",
            )
            .execute(&pool)
            .await
            .unwrap();
        }
    }
    let (off, on, mailed) = (median(&off), median(&on), median(&mailed));
    println!(
        "median: sale {off:.0} orders/s with the mailer off, {on:.0} with it on ({:.2}x); mailer {mailed:.0} mails/s (ticket mails with PDFs)",
        on / off
    );
}
