//! Issue 13: presale codes, against real Postgres. A code's uses are
//! enforced like stock, in the sale transaction, and come back exactly once
//! with a cancelled or expired order; a hidden ticket type is invisible and
//! unsellable without a code that unlocks it. Every count is read from the
//! tables.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod guessing;
mod pages;
mod paging;
mod uses;

use crate::common;

use common::{
    TestApp, TicketSpec, assert_invariants, now, pool, published_event, purchase::purchase_request,
};
use futures::future::join_all;
use reqwest::Method;
use serde_json::{Value, json};
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use stampede::{
    db,
    domain::{CodeInput, ConfirmKey, PresaleCode},
    error::AppError,
    sale::{self, EngineSettings, Purchase, PurchaseRequest, Sales, Strategy},
};
use time::Duration as Span;
use uuid::Uuid;

/// Hide the ticket type and give its event a code for `uses` tickets that
/// unlocks it.
async fn hidden_with_code(
    pool: &PgPool,
    fixture: &common::Fixture,
    tt: Uuid,
    code: &str,
    uses: i64,
) {
    sqlx::query("UPDATE ticket_types SET hidden = true WHERE id = $1")
        .bind(tt)
        .execute(pool)
        .await
        .unwrap();
    let input = CodeInput {
        code: code.into(),
        max_uses: uses.to_string(),
        ticket_type_ids: vec![tt.to_string()],
        ..CodeInput::default()
    };
    db::presale::create(
        pool,
        fixture.organizer_id.into(),
        fixture.event_id.into(),
        &stampede::domain::Quotas::default(),
        &input.parse(&stampede::domain::Zone::utc()).unwrap(),
    )
    .await
    .unwrap();
}

fn with_code(mut request: PurchaseRequest, code: &str) -> PurchaseRequest {
    request.presale_code = Some(PresaleCode::parse(code).unwrap());
    request
}

async fn used(pool: &PgPool, code: &str) -> i32 {
    sqlx::query_scalar("SELECT used FROM presale_codes WHERE code = $1")
        .bind(code)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Tickets of live orders bought with the code: what its `used` must say.
async fn sold_with(pool: &PgPool, code: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT coalesce(sum(o.quantity), 0)::int8 FROM orders o
         JOIN presale_codes c ON c.id = o.presale_code_id
         WHERE c.code = $1 AND o.status IN ('held', 'confirmed')",
    )
    .bind(code)
    .fetch_one(pool)
    .await
    .unwrap()
}
