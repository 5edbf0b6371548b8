//! The scenarios and their defaults, resolved against the flags into a plan.

use std::time::Duration;

use crate::cli::{QuantitySpec, RunArgs, ScenarioKind, Via};

/// What one attempt does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Buy tickets (through the API or the form, per `--via`).
    Buy(Via),
    /// GET the event page.
    Page,
    /// GET a fixed path and expect a status.
    Get { path: &'static str, expect: u16 },
}

/// Path of the trivial route: no such API route, so the JSON 404.
pub const TRIVIAL_PATH: &str = "/api/v1/stampede-load-trivial";

/// The scenario with every default filled in.
#[derive(Debug, Clone)]
pub struct Plan {
    pub kind: ScenarioKind,
    pub action: Action,
    pub concurrency: usize,
    /// Open loop: attempts per second in all.
    pub rate: Option<f64>,
    pub attempts: Option<u64>,
    pub duration: Option<Duration>,
    pub timeout: Duration,
    pub events: usize,
    pub ticket_types_per_event: usize,
    pub tickets: i32,
    pub quantity: QuantitySpec,
    pub max_per_order: i32,
    pub max_per_buyer: i32,
    /// The events hold orders this long (seconds) for mail confirmation.
    pub hold_seconds: Option<i32>,
    /// Stripe takes the events' prices: orders are held for payment.
    pub paid: bool,
}

/// More tickets than any run on one machine can sell.
const PLENTY: i32 = 1_000_000_000;

impl Plan {
    pub fn resolve(args: &RunArgs) -> anyhow::Result<Self> {
        use ScenarioKind as K;
        let kind = args.scenario;
        let seconds = |s: f64| Duration::from_secs_f64(s);
        // (attempts, concurrency, tickets, quantity) by default.
        let (attempts, concurrency, tickets, quantity) = match kind {
            K::Seed000 => (Some(200), 200, 10, QuantitySpec { min: 1, max: 4 }),
            K::Seed001 => (Some(10_000), 1_000, 100, QuantitySpec::ONE),
            K::Hot | K::ManyEvents => (None, 1_000, PLENTY, QuantitySpec::ONE),
            K::Sellout => (None, 1_000, 100, QuantitySpec::ONE),
            K::RushPage => (None, 1_000, 1_000, QuantitySpec::ONE),
            K::Trivial | K::Health | K::Hello => (None, 1_000, 0, QuantitySpec::ONE),
        };
        let action = match kind {
            K::RushPage => Action::Page,
            K::Trivial => Action::Get {
                path: TRIVIAL_PATH,
                expect: 404,
            },
            K::Health => Action::Get {
                path: "/healthz",
                expect: 200,
            },
            K::Hello => Action::Get {
                path: "/",
                expect: 200,
            },
            _ => Action::Buy(args.via),
        };
        // A run is bounded by attempts, by time, or by both (whichever
        // comes first); scenarios without a fixed size run for 10 s.
        let attempts = args.attempts.or(attempts);
        let duration = args
            .duration
            .map(seconds)
            .or_else(|| attempts.is_none().then(|| seconds(10.0)));
        let quantity = args.quantity.unwrap_or(quantity);
        let max_per_order = i32::try_from(quantity.max.max(4))?;
        let plan = Self {
            kind,
            action,
            concurrency: args.concurrency.unwrap_or(concurrency).max(1),
            rate: args.rate,
            attempts,
            duration,
            timeout: seconds(args.timeout),
            events: if kind == K::ManyEvents {
                args.events.unwrap_or(100).max(1)
            } else {
                1
            },
            ticket_types_per_event: if kind == K::RushPage { 3 } else { 1 },
            tickets: args.tickets.unwrap_or(tickets),
            quantity,
            max_per_order,
            max_per_buyer: max_per_order,
            hold_seconds: args.hold_minutes.map(|m| m * 60),
            paid: args.paid,
        };
        if plan.rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
            anyhow::bail!("--rate must be a positive number of attempts per second");
        }
        if plan.tickets < 0 {
            anyhow::bail!("--tickets cannot be negative");
        }
        Ok(plan)
    }

    pub fn needs_database(&self) -> bool {
        !matches!(self.action, Action::Get { .. })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn plan(line: &str) -> Plan {
        let cli = Cli::parse_from(line.split_whitespace());
        let Command::Run(args) = cli.command else {
            panic!("not a run");
        };
        Plan::resolve(&args).unwrap()
    }

    #[test]
    fn seed000_is_200_buyers_for_10_tickets_of_one_to_four() {
        let p = plan("stampede-load run seed000");
        assert_eq!((p.attempts, p.concurrency, p.tickets), (Some(200), 200, 10));
        assert_eq!(p.quantity, QuantitySpec { min: 1, max: 4 });
        assert_eq!(p.duration, None);
    }

    #[test]
    fn open_ended_scenarios_run_ten_seconds_unless_bounded_otherwise() {
        assert_eq!(
            plan("stampede-load run hot").duration,
            Some(Duration::from_secs(10))
        );
        let p = plan("stampede-load run hot --attempts 500 --concurrency 16");
        assert_eq!(
            (p.attempts, p.duration, p.concurrency),
            (Some(500), None, 16)
        );
        // A sized scenario keeps its size under a time limit.
        let p = plan("stampede-load run seed001 --duration 5");
        assert_eq!(
            (p.attempts, p.duration),
            (Some(10_000), Some(Duration::from_secs(5)))
        );
    }
}
