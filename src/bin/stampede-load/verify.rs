//! After the run: what committed, counted from Postgres, and the invariants
//! of DESIGN.md for the run's ticket types, against what the buyers heard.

use std::{
    collections::{HashMap, HashSet},
    time::Duration,
};

use sqlx::PgPool;
use uuid::Uuid;

use crate::{driver::Tally, setup::Sale};

/// How many ids each list of problems shows.
const EXAMPLES: usize = 10;

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Invariants {
    /// Every check below passed.
    pub ok: bool,
    pub committed_orders: u64,
    pub committed_tickets: u64,
    pub capacity: i64,
    pub remaining: i64,
    /// A ticket type with `remaining < 0` or more live tickets than capacity.
    pub oversold: bool,
    /// Ticket types where `capacity != remaining + live quantity`.
    pub capacity_mismatches: u64,
    /// Orders above `max_per_order` plus buyers above `max_per_buyer`.
    pub limit_violations: u64,
    /// Successes the buyers heard with no committed order behind them.
    pub answered_not_committed: u64,
    /// One order id answered as a success to more than one attempt.
    pub answered_twice: u64,
    /// Committed orders never answered as a success whose attempt timed out
    /// or broke: explained (the buyer can find them by key), not lost.
    pub committed_after_client_error: u64,
    /// Committed orders never answered and not explained by a client error.
    pub unanswered: u64,
    /// Up to ten ids of each kind of problem.
    pub examples: Vec<String>,
}

pub async fn check(db: &PgPool, sale: &Sale, tally: &Tally) -> anyhow::Result<Invariants> {
    let ids = sale.ticket_type_ids();
    let types = sqlx::query!(
        r#"SELECT t.id AS "id!", t.capacity AS "capacity!", t.remaining AS "remaining!",
                  COALESCE((SELECT SUM(o.quantity) FROM orders o
                            WHERE o.ticket_type_id = t.id AND o.status IN ('held', 'confirmed')), 0)::int8 AS "live!"
           FROM ticket_types t WHERE t.id = ANY($1)"#,
        &ids
    )
    .fetch_all(db)
    .await?;
    let orders = sqlx::query!(
        "SELECT id, idempotency_key, quantity FROM orders
         WHERE ticket_type_id = ANY($1) AND status IN ('held', 'confirmed')",
        &ids
    )
    .fetch_all(db)
    .await?;
    let limit_violations = sqlx::query_scalar!(
        r#"SELECT (SELECT count(*) FROM orders o JOIN ticket_types t ON t.id = o.ticket_type_id
                   WHERE o.ticket_type_id = ANY($1) AND o.quantity > t.max_per_order)
                + (SELECT count(*) FROM (
                       SELECT 1 FROM orders o JOIN ticket_types t ON t.id = o.ticket_type_id
                       WHERE o.ticket_type_id = ANY($1) AND o.status IN ('held', 'confirmed')
                       GROUP BY o.ticket_type_id, COALESCE(o.buyer_key, o.email), t.max_per_buyer
                       HAVING SUM(o.quantity) > t.max_per_buyer) b) AS "n!""#,
        &ids
    )
    .fetch_one(db)
    .await?;

    let mut inv = Invariants {
        limit_violations: u64::try_from(limit_violations)?,
        committed_orders: orders.len() as u64,
        committed_tickets: orders
            .iter()
            .map(|o| u64::from(o.quantity.unsigned_abs()))
            .sum(),
        ..Invariants::default()
    };
    for t in &types {
        inv.capacity += i64::from(t.capacity);
        inv.remaining += i64::from(t.remaining);
        inv.oversold |= t.remaining < 0 || t.live > i64::from(t.capacity);
        if i64::from(t.capacity) != i64::from(t.remaining) + t.live {
            inv.capacity_mismatches += 1;
            inv.examples
                .push(format!("capacity mismatch: ticket type {}", t.id));
        }
    }

    let mut answered: HashMap<Uuid, u32> = HashMap::with_capacity(tally.sold.len());
    for id in &tally.sold {
        *answered.entry(*id).or_default() += 1;
    }
    let committed: HashSet<Uuid> = orders.iter().map(|o| o.id).collect();
    let unsure: HashSet<&str> = tally.unsure_keys.iter().map(String::as_str).collect();
    let mut examples = Vec::new();
    for (id, times) in &answered {
        if !committed.contains(id) {
            inv.answered_not_committed += 1;
            examples.push(format!("answered, not committed: order {id}"));
        }
        if *times > 1 {
            inv.answered_twice += 1;
            examples.push(format!("answered {times} times: order {id}"));
        }
    }
    for order in &orders {
        if answered.contains_key(&order.id) {
            continue;
        }
        if unsure.contains(order.idempotency_key.as_str()) {
            inv.committed_after_client_error += 1;
        } else {
            inv.unanswered += 1;
            examples.push(format!("committed, never answered: order {}", order.id));
        }
    }
    examples.sort();
    inv.examples.extend(examples);
    inv.examples.truncate(EXAMPLES);
    inv.ok = !inv.oversold
        && inv.capacity_mismatches == 0
        && inv.limit_violations == 0
        && inv.answered_not_committed == 0
        && inv.answered_twice == 0
        && inv.unanswered == 0
        && types.len() == ids.len();
    Ok(inv)
}

/// Transactions (commits and rollbacks) the database has counted so far.
pub async fn pg_transactions(db: &PgPool) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar!(
        r#"SELECT (xact_commit + xact_rollback)::int8 AS "n!"
           FROM pg_stat_database WHERE datname = current_database()"#
    )
    .fetch_one(db)
    .await?)
}

/// Transactions since `before`, after giving idle backends the time to
/// flush their statistics (Postgres does so ~10 s after they go idle).
pub async fn pg_transactions_since(db: &PgPool, before: i64) -> anyhow::Result<i64> {
    tokio::time::sleep(Duration::from_secs(11)).await;
    Ok(pg_transactions(db).await? - before)
}
