//! Two doors scanning one ticket at the same instant, many times over,
//! against real Postgres: each code is let in exactly once, the refused
//! door is told where it went in, and a scan retried under its nonce gets
//! the first answer. Checked from the tables, not only from the answers.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::{collections::HashMap, sync::Arc};

use common::{
    TicketSpec, now, pool, published_event,
    purchase::{buy, purchase_request},
    ticket_codes,
};
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use stampede::{
    checkin::{self, Answer, Scan},
    domain::{CheckInResult, DoorName, ScanNonce, TicketCode},
    sale::Purchase,
};
use tokio::sync::Barrier;
use uuid::Uuid;

/// `count` tickets of a fresh event (four per order); the event and codes.
async fn tickets(pool: &PgPool, count: i64) -> (Uuid, Vec<String>) {
    let fixture = published_event(pool, &[TicketSpec::new(count, 4, count)]).await;
    let mut codes = Vec::new();
    for i in 0..count / 4 {
        let request = purchase_request(fixture.ticket_type_id(), 4, &format!("g{i}@example.org"));
        let Purchase::Created { order, .. } = buy(pool, now(), &request).await.unwrap() else {
            panic!("a fresh key replayed");
        };
        codes.extend(ticket_codes(pool, order.id.get()).await);
    }
    assert_eq!(codes.len() as i64, count);
    (fixture.event_id, codes)
}

fn scan(event_id: Uuid, code: &str, door: &str, nonce: &str) -> Scan {
    Scan {
        event_id: event_id.into(),
        code: TicketCode::parse(code).unwrap(),
        door: DoorName::parse(door).unwrap(),
        nonce: ScanNonce::parse(nonce).unwrap(),
    }
}

/// Every pair of scans at once: the two of a pair are released together by
/// their own barrier, all pairs run side by side. Answers in pair order.
async fn race_pairs(pool: &PgPool, pairs: Vec<[Scan; 2]>) -> Vec<[Answer; 2]> {
    let tasks: Vec<_> = pairs
        .into_iter()
        .map(|pair| {
            let barrier = Arc::new(Barrier::new(2));
            pair.map(|scan| {
                let pool = pool.clone();
                let barrier = barrier.clone();
                tokio::spawn(async move {
                    barrier.wait().await;
                    checkin::redeem(&pool, now(), &scan).await.unwrap()
                })
            })
        })
        .collect();
    let mut answers = Vec::new();
    for [a, b] in tasks {
        answers.push([a.await.unwrap(), b.await.unwrap()]);
    }
    answers
}

/// Per code: when and where the table says it was redeemed.
async fn redemptions(
    pool: &PgPool,
) -> HashMap<String, (Option<time::OffsetDateTime>, Option<String>)> {
    let rows: Vec<(String, Option<time::OffsetDateTime>, Option<String>)> =
        sqlx::query_as("SELECT code, redeemed_at, redeemed_door FROM tickets")
            .fetch_all(pool)
            .await
            .unwrap();
    rows.into_iter()
        .map(|(code, at, door)| (code, (at, door)))
        .collect()
}

#[sqlx::test]
async fn two_doors_scanning_each_of_two_hundred_codes_at_once_let_each_in_exactly_once(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 24).await;
    let (event_id, codes) = tickets(&pool, 200).await;
    let pairs: Vec<[Scan; 2]> = codes
        .iter()
        .map(|code| {
            [
                scan(event_id, code, "North", &Uuid::new_v4().to_string()),
                scan(event_id, code, "South", &Uuid::new_v4().to_string()),
            ]
        })
        .collect();
    let answers = race_pairs(&pool, pairs).await;
    let table = redemptions(&pool).await;

    for (code, [a, b]) in codes.iter().zip(&answers) {
        let oks: Vec<&Answer> = [a, b].into_iter().filter(|x| x.result.is_ok()).collect();
        assert_eq!(
            oks.len(),
            1,
            "{code}: exactly one door lets it in: {a:?} {b:?}"
        );
        let (winner, loser) = if a.result.is_ok() { (a, b) } else { (b, a) };
        assert_eq!(loser.result, CheckInResult::AlreadyRedeemed, "{code}");
        // The refused door hears when and where the ticket went in, and the
        // table agrees with the door that was told `ok`.
        assert_eq!(
            (loser.redeemed_at, &loser.door),
            (winner.redeemed_at, &winner.door)
        );
        assert_eq!(
            table[code],
            (winner.redeemed_at, winner.door.clone()),
            "{code}"
        );
        assert!(!winner.replayed && !loser.replayed);
    }
    let (ok, scans): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE result = 'ok'), count(*) FROM check_in_scans",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        (ok, scans),
        (200, 400),
        "one ok and one refusal recorded per code"
    );
}

#[sqlx::test]
async fn a_scan_sent_twice_at_once_under_one_nonce_gets_one_answer_twice(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 24).await;
    let (event_id, codes) = tickets(&pool, 100).await;
    let pairs: Vec<[Scan; 2]> = codes
        .iter()
        .map(|code| {
            let nonce = Uuid::new_v4().to_string();
            [
                scan(event_id, code, "North", &nonce),
                scan(event_id, code, "North", &nonce),
            ]
        })
        .collect();
    let answers = race_pairs(&pool, pairs).await;
    let table = redemptions(&pool).await;
    for (code, [a, b]) in codes.iter().zip(&answers) {
        assert_eq!(a.result, CheckInResult::Ok, "{code}: {a:?}");
        assert_eq!(b.result, CheckInResult::Ok, "{code}: {b:?}");
        assert_eq!(
            a.replayed as u8 + b.replayed as u8,
            1,
            "{code}: one is the replay"
        );
        assert_eq!((a.redeemed_at, &a.door), (b.redeemed_at, &b.door));
        assert_eq!(table[code], (a.redeemed_at, a.door.clone()));
    }
    let scans: i64 = sqlx::query_scalar("SELECT count(*) FROM check_in_scans")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(scans, 100, "one scan recorded per nonce");
}
