//! The batch's one transaction: lock the ticket type's row, read the
//! event, let what came meanwhile join, decide each request
//! ([`super::decide`]) and write what sold in one statement
//! ([`super::rows`]), under a lock and statement timeout that end by the
//! batch's earliest deadline.

use std::time::Instant;

use sqlx::PgPool;

use super::{
    decide::{Decision, Rules, decide},
    intake::Intake,
    job::Job,
    rows::{Hold, Locked, Written, codes, existing_orders, holdings, order_key, write},
    unproven::{self, Unproven},
};
use crate::{
    domain::{BuyerKey, BuyerLimits, EventStatus, SaleWindow, TicketTypeId},
    error::AppError,
    sale::{holds::Holding, outcome::Purchase, replay::replay, round_trips::postgres_round},
};

/// What a batch did: an answer per job, and what is left. `None`: the job
/// is answered after the commit on its own ([`crate::sale::single`]), which replays the
/// order of its twin (the same buyer and key earlier in the batch, or
/// committed by another instance meanwhile), or sells if the twin failed.
pub(super) struct Sold {
    pub(super) answers: Vec<Option<Result<Purchase, AppError>>>,
    pub(super) sold: usize,
    pub(super) remaining: Option<i32>,
}

/// Whether the batch failed because it ran into its deadline (the lock or
/// statement timeout that [`sell_batch`] sets).
pub(super) fn past_deadline(err: &AppError) -> bool {
    let AppError::Internal(cause) = err else {
        return false;
    };
    cause
        .downcast_ref::<sqlx::Error>()
        .and_then(sqlx::Error::as_database_error)
        .and_then(|db| db.code())
        // lock_not_available, query_canceled
        .is_some_and(|code| code == "55P03" || code == "57014")
}

pub(super) async fn sell_batch(
    db: &PgPool,
    holding: &Holding,
    ticket_type_id: TicketTypeId,
    jobs: &mut Vec<Job>,
    deadline: Instant,
    intake: Option<&mut Intake>,
) -> Result<Sold, AppError> {
    let waited = Instant::now();
    postgres_round("batch");
    let mut tx = db.begin().await?;
    metrics::histogram!("stampede_db_pool_wait_seconds").record(waited.elapsed().as_secs_f64());
    // Nothing of this batch may commit after its earliest buyer's deadline.
    let left_ms = deadline
        .saturating_duration_since(Instant::now())
        .as_millis()
        .max(1);
    sqlx::query_file!("sql/sale/batch_timeouts.sql", format!("{left_ms}ms"),)
        .fetch_one(&mut *tx)
        .await?;
    let Some(locked) =
        sqlx::query_file_as!(Locked, "sql/sale/batch_lock.sql", ticket_type_id.get(),)
            .fetch_optional(&mut *tx)
            .await?
    else {
        tx.rollback().await?;
        return Ok(Sold::all(jobs, || Err(AppError::NotFound)));
    };
    // A statement of its own, after the lock: it sees what committed meanwhile.
    let event = sqlx::query_file!("sql/sale/batch_event.sql", locked.event_id,)
        .fetch_one(&mut *tx)
        .await?;
    // What came while the row was locked joins this batch: under a burst
    // the lock takes a while, and the next batch would wait for this one.
    if let Some(intake) = intake {
        intake.join(jobs, locked.remaining).await;
    }
    if jobs.is_empty() {
        // Opened ahead, and none came.
        tx.rollback().await?;
        return Ok(Sold::all(jobs, || Err(AppError::NotFound)));
    }
    let jobs: &[Job] = jobs;
    tracing::Span::current().record("size", jobs.len());
    metrics::histogram!("stampede_batch_size").record(jobs.len() as f64);
    let window = SaleWindow {
        status: event.status,
        opens_at: event.sale_opens_at,
        closes_at: event.sale_closes_at,
        starts_at: event.starts_at,
    };

    let limits = BuyerLimits {
        per_ticket_type: locked.max_per_buyer,
        per_event: event.max_per_buyer,
    };

    let emails: Vec<&str> = jobs.iter().map(|j| j.request.email.as_str()).collect();
    let keys: Vec<&str> = jobs
        .iter()
        .map(|j| j.request.idempotency_key.as_str())
        .collect();
    let buyers: Vec<BuyerKey> = jobs
        .iter()
        .map(|j| {
            j.buyer
                .clone()
                .unwrap_or_else(|| BuyerKey::from(&j.request.email))
        })
        .collect();
    let existing = existing_orders(&mut *tx, &emails, &keys).await?;
    let codes = codes(&mut tx, ticket_type_id, locked.event_id, jobs).await?;
    let held = holdings(&mut tx, ticket_type_id, locked.event_id, &buyers).await?;
    // A ticket with a price that Stripe takes is held for the event's time
    // to pay, in full (paying proves more than a mailbox); else, for the
    // event's hold, if any.
    let paid = locked.price_minor > 0 && event.takes_payment;
    let hold_seconds = if paid {
        Some(event.pay_seconds)
    } else {
        event.hold_seconds
    };
    let mut unproven = match hold_seconds {
        Some(hold_secs) => {
            let mut rules = holding.rules;
            if paid {
                rules.unproven = std::time::Duration::MAX;
            }
            unproven::read(&mut tx, rules, locked.event_id, hold_secs, jobs, &buyers).await?
        }
        None => Unproven::default(),
    };

    let rules = Rules {
        locked: &locked,
        limits,
        window: &window,
        existing: &existing,
    };
    let decisions = decide(jobs, &buyers, &rules, held, codes, &mut unproven);
    let selling: Vec<(&Job, &BuyerKey)> = jobs
        .iter()
        .zip(&buyers)
        .zip(&decisions)
        .filter(|(_, d)| matches!(d, Decision::Sell { .. }))
        .map(|(sale, _)| sale)
        .collect();
    // Each sale's hold, in the same order (none for an event without holds).
    let holds: Vec<unproven::JobHold> = decisions
        .iter()
        .enumerate()
        .filter(|(_, d)| matches!(d, Decision::Sell { .. }))
        .filter_map(|(index, _)| unproven.jobs.get(index).cloned())
        .collect();
    // The presale code of each sale, in the same order.
    let code_ids: Vec<Option<uuid::Uuid>> = decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Sell { code } => Some(*code),
            _ => None,
        })
        .collect();
    let created = if selling.is_empty() {
        tx.rollback().await?;
        Written::default()
    } else {
        let hold = hold_seconds.map(|seconds| Hold {
            seconds,
            key: &holding.key,
            sales: &holds,
        });
        let written = write(
            &mut tx,
            ticket_type_id,
            &locked,
            limits,
            hold,
            &selling,
            &code_ids,
        )
        .await?;
        tx.commit().await?;
        written
    };

    let answers = jobs
        .iter()
        .zip(decisions)
        .map(|(job, decision)| match decision {
            Decision::Refuse(err) => Some(Err(err)),
            Decision::Replay(order) => Some(replay(order, &job.request)),
            Decision::Sell { .. } => {
                created
                    .orders
                    .get(&order_key(&job.request))
                    .map(|(order, cancel_secret)| {
                        Ok(Purchase::Created {
                            order: order.clone(),
                            cancel_secret: cancel_secret.clone(),
                        })
                    })
            }
            Decision::Twin => None,
        })
        .collect();
    Ok(Sold {
        answers,
        sold: created.orders.len(),
        remaining: created.remaining.or(Some(locked.remaining)),
    })
}

impl Sold {
    fn all(jobs: &[Job], answer: impl Fn() -> Result<Purchase, AppError>) -> Self {
        Self {
            answers: jobs.iter().map(|_| Some(answer())).collect(),
            sold: 0,
            remaining: None,
        }
    }
}
