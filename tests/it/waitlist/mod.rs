//! Issue 13: waiting lists, against real Postgres (and a real SMTP server on
//! loopback, `common::smtp`). Stock that comes back (an expired hold, a
//! cancel, a raised capacity) goes to the first in line as a held order, in
//! the transaction that frees it; every outcome is read from the tables.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod line;
mod page;
mod paging;

use crate::common;

use std::time::Duration;

use common::{
    TestApp, TicketSpec, assert_invariants,
    holds::{burst, engine, hold_for, messages, sweep},
    mailed_link, now, pool, published_event,
    purchase::purchase_request,
    remaining, set_capacity,
    smtp::Sink,
};
use futures::future::join_all;
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use stampede::{
    clock::ManualClock,
    db::{self, waitlist::Joined},
    domain::{CancelSecret, ConfirmKey, Email, OrderId, Quantity, WaitlistEntryId},
    error::AppError,
    mail::{self, MailSettings},
    sale::{self, Confirmed},
    web::AppState,
};
use time::{Duration as Span, OffsetDateTime};
use uuid::Uuid;

async fn try_join(
    pool: &PgPool,
    key: &ConfirmKey,
    fixture: &common::Fixture,
    email: &str,
    quantity: i64,
    at: OffsetDateTime,
) -> Result<Joined, AppError> {
    db::waitlist::join(
        pool,
        key,
        at,
        fixture.event_id.into(),
        fixture.ticket_type_id().into(),
        &Email::parse(email).unwrap(),
        Quantity::new(quantity).unwrap(),
    )
    .await
}

/// Join and confirm the address, as the mail's link does: a place in line.
async fn join_line(
    pool: &PgPool,
    key: &ConfirmKey,
    fixture: &common::Fixture,
    email: &str,
    at: OffsetDateTime,
) -> WaitlistEntryId {
    let Joined::New(entry) = try_join(pool, key, fixture, email, 1, at).await.unwrap() else {
        panic!("{email} had a place already");
    };
    db::waitlist::confirm(pool, at, entry, &key.waitlist_token(entry))
        .await
        .unwrap();
    entry
}

/// The places offered something, in line order, with their orders.
async fn offered(pool: &PgPool, ticket_type_id: Uuid) -> Vec<(Uuid, Uuid)> {
    sqlx::query_as(
        "SELECT id, order_id FROM waitlist_entries
         WHERE ticket_type_id = $1 AND status = 'offered' ORDER BY position",
    )
    .bind(ticket_type_id)
    .fetch_all(pool)
    .await
    .unwrap()
}

async fn entry_status(pool: &PgPool, entry: WaitlistEntryId) -> String {
    sqlx::query_scalar("SELECT status FROM waitlist_entries WHERE id = $1")
        .bind(entry.get())
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Two instances' sweepers, twice over, at once; how many expired in all.
async fn two_sweepers(pool: &PgPool, other: &PgPool, at: OffsetDateTime) -> u64 {
    join_all([
        sweep(pool, at),
        sweep(other, at),
        sweep(pool, at),
        sweep(other, at),
    ])
    .await
    .into_iter()
    .sum()
}
