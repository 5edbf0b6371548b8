//! The report of one run: as a table for people, as JSON for machines.

use std::{collections::BTreeMap, fmt::Write as _, time::Duration};

use uuid::Uuid;

use crate::{
    cli::RunArgs,
    driver::{Latency, Played},
    scenario::{Action, Plan},
    setup::Sale,
    verify::Invariants,
};

#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub struct LatencyMs {
    pub count: u64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

impl LatencyMs {
    fn of(h: &Latency) -> Option<Self> {
        let ms = |us: u64| us as f64 / 1000.0;
        (!h.is_empty()).then(|| Self {
            count: h.len(),
            p50: ms(h.value_at_quantile(0.50)),
            p95: ms(h.value_at_quantile(0.95)),
            p99: ms(h.value_at_quantile(0.99)),
            max: ms(h.max()),
        })
    }
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Report {
    pub label: String,
    pub scenario: String,
    /// `api` or `form` for purchases, `get` otherwise.
    pub via: String,
    /// `closed` (N buyers) or `open` (a fixed rate).
    pub shape: String,
    pub concurrency: usize,
    pub rate: Option<f64>,
    pub threads: usize,
    pub urls: Vec<String>,
    pub events: usize,
    pub tickets_per_type: i32,
    pub quantity: String,
    pub ticket_type_ids: Vec<Uuid>,
    pub elapsed_secs: f64,
    pub attempts: u64,
    pub attempts_per_sec: f64,
    /// GETs answered with the expected status.
    pub ok: u64,
    /// Purchases answered as a success.
    pub sold_answers: u64,
    pub refused: BTreeMap<String, u64>,
    pub refused_total: u64,
    pub refused_per_sec: f64,
    pub errors: BTreeMap<String, u64>,
    pub errors_total: u64,
    /// Counted from Postgres.
    pub committed_orders: Option<u64>,
    pub committed_tickets: Option<u64>,
    pub committed_per_sec: Option<f64>,
    /// Seconds from the start to the last answer of a sale, and the
    /// purchases answered as sold per second until then: the throughput
    /// while tickets remain.
    pub selling_secs: Option<f64>,
    pub sold_per_sec_while_selling: Option<f64>,
    /// `attempt` (from the scheduled start), and for the form `page`, `post`.
    pub latency_ms: BTreeMap<String, LatencyMs>,
    pub invariants: Option<Invariants>,
    pub client_cpu_secs: Option<f64>,
    pub client_cpu_us_per_attempt: Option<f64>,
    pub server_cpu_secs: Option<f64>,
    pub server_cpu_us_per_attempt: Option<f64>,
    /// Postgres transactions during the run (`--pg-stats`).
    pub pg_transactions: Option<i64>,
}

impl Report {
    pub fn new(
        args: &RunArgs,
        plan: &Plan,
        sale: &Sale,
        played: Played,
        invariants: Option<Invariants>,
        server_cpu: Option<Duration>,
        pg_transactions: Option<i64>,
    ) -> Self {
        let secs = played.elapsed.as_secs_f64().max(1e-9);
        let tally = played.tally;
        let attempts = tally.attempts;
        let per_attempt =
            |cpu: Option<Duration>| cpu.map(|c| c.as_secs_f64() * 1e6 / attempts.max(1) as f64);
        let mut latency_ms = BTreeMap::new();
        for (name, h) in [
            ("attempt", &played.latency.attempt),
            ("page", &played.latency.page),
            ("post", &played.latency.post),
        ] {
            if let Some(summary) = LatencyMs::of(h) {
                latency_ms.insert(name.to_owned(), summary);
            }
        }
        let owned = |m: BTreeMap<_, u64>| {
            m.into_iter()
                .map(|(k, v): (std::borrow::Cow<'static, str>, u64)| (k.into_owned(), v))
                .collect::<BTreeMap<_, _>>()
        };
        let refused = owned(tally.refused);
        let errors = owned(tally.failed);
        let refused_total = refused.values().sum();
        let committed_orders = invariants.as_ref().map(|i| i.committed_orders);
        Self {
            label: args.label.clone().unwrap_or_else(|| default_label(plan)),
            scenario: plan.kind.name().to_owned(),
            via: match plan.action {
                Action::Buy(via) => format!("{via:?}").to_lowercase(),
                _ => "get".to_owned(),
            },
            shape: if plan.rate.is_some() {
                "open"
            } else {
                "closed"
            }
            .to_owned(),
            concurrency: plan.concurrency,
            rate: plan.rate,
            threads: args.threads,
            urls: args.urls.clone(),
            events: plan.events,
            tickets_per_type: plan.tickets,
            quantity: plan.quantity.to_string(),
            ticket_type_ids: sale.ticket_type_ids(),
            elapsed_secs: secs,
            attempts,
            attempts_per_sec: attempts as f64 / secs,
            ok: tally.ok,
            sold_answers: tally.sold.len() as u64,
            refused_per_sec: refused_total as f64 / secs,
            refused_total,
            refused,
            errors_total: errors.values().sum(),
            errors,
            committed_per_sec: committed_orders.map(|c| c as f64 / secs),
            selling_secs: tally.last_sold.map(|d| d.as_secs_f64()),
            sold_per_sec_while_selling: tally
                .last_sold
                .map(|d| tally.sold.len() as f64 / d.as_secs_f64().max(1e-9)),
            committed_orders,
            committed_tickets: invariants.as_ref().map(|i| i.committed_tickets),
            latency_ms,
            invariants,
            client_cpu_secs: played.client_cpu.map(|c| c.as_secs_f64()),
            client_cpu_us_per_attempt: per_attempt(played.client_cpu),
            server_cpu_secs: server_cpu.map(|c| c.as_secs_f64()),
            server_cpu_us_per_attempt: per_attempt(server_cpu),
            pg_transactions,
        }
    }

    pub fn render_text(&self) -> String {
        let mut out = String::new();
        let shape = match self.rate {
            Some(rate) => format!(
                "open loop at {rate}/s over {} connections",
                self.concurrency
            ),
            None => format!("closed loop, {} buyers", self.concurrency),
        };
        let _ = writeln!(
            out,
            "stampede-load {} ({}) via {}, {shape}, {} threads -> {}",
            self.scenario,
            self.label,
            self.via,
            self.threads,
            self.urls.join(" ")
        );
        let mut row = |name: &str, value: String| {
            let _ = writeln!(out, "  {name:<28} {value}");
        };
        let rate = |n: u64| format!("{n:>10}  ({:.1}/s)", n as f64 / self.elapsed_secs);
        row("elapsed", format!("{:>10.2} s", self.elapsed_secs));
        row("attempts", rate(self.attempts));
        if self.via == "get" {
            row("answered as expected", rate(self.ok));
        } else {
            row("answered as sold", rate(self.sold_answers));
        }
        if let (Some(orders), Some(tickets)) = (self.committed_orders, self.committed_tickets) {
            row("committed orders (Postgres)", rate(orders));
            row("tickets sold (Postgres)", format!("{tickets:>10}"));
        }
        if let (Some(secs), Some(per_sec)) = (self.selling_secs, self.sold_per_sec_while_selling) {
            row(
                "sold while tickets remained",
                format!("{per_sec:>10.0}/s over the first {secs:.2} s"),
            );
        }
        row("refused", rate(self.refused_total));
        for (reason, n) in &self.refused {
            row(&format!("  {reason}"), format!("{n:>10}"));
        }
        row("errors", rate(self.errors_total));
        for (reason, n) in &self.errors {
            row(&format!("  {reason}"), format!("{n:>10}"));
        }
        for (name, l) in &self.latency_ms {
            row(
                &format!("latency ms ({name})"),
                format!(
                    "p50 {:.2}  p95 {:.2}  p99 {:.2}  max {:.2}",
                    l.p50, l.p95, l.p99, l.max
                ),
            );
        }
        if let Some(us) = self.client_cpu_us_per_attempt {
            row("generator CPU per attempt", format!("{us:>10.1} us"));
        }
        if let Some(us) = self.server_cpu_us_per_attempt {
            row("server CPU per attempt", format!("{us:>10.1} us"));
        }
        if let Some(n) = self.pg_transactions {
            row("Postgres transactions", format!("{n:>10}"));
        }
        if let Some(inv) = &self.invariants {
            row("invariants", inv.verdict());
            for example in &inv.examples {
                row("", example.clone());
            }
        }
        out
    }
}

impl Invariants {
    pub fn verdict(&self) -> String {
        let head = if self.ok { "OK" } else { "FAILED" };
        format!(
            "{head}: oversold {}, capacity = remaining + sold off by {} types, \
             {} limit violations, {} answered but not committed, {} answered twice, \
             {} committed but unanswered (+{} after a client time-out or error)",
            if self.oversold { "YES" } else { "no" },
            self.capacity_mismatches,
            self.limit_violations,
            self.answered_not_committed,
            self.answered_twice,
            self.unanswered,
            self.committed_after_client_error,
        )
    }
}

fn default_label(plan: &Plan) -> String {
    match plan.rate {
        Some(rate) => format!("{}@{rate}/s", plan.kind.name()),
        None => format!("{}@{}", plan.kind.name(), plan.concurrency),
    }
}
