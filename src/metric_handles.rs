//! Metric handles kept at hand for hot paths: building a metric's key and
//! finding it in the recorder's registry costs a request (a rush's
//! refusals) more than the count itself. Below every layer that records.

use std::sync::{PoisonError, RwLock};

use metrics::Counter;

/// One counter per value of its one label, kept at hand: building a
/// metric's key and finding it in the recorder's registry costs a hot path
/// (a rush's refusals) more than the count itself. The values are
/// `'static`, so the set stays as small as the code's outcomes.
pub struct CounterByLabel {
    name: &'static str,
    label: &'static str,
    counters: RwLock<Vec<(&'static str, Counter)>>,
}

impl CounterByLabel {
    pub const fn new(name: &'static str, label: &'static str) -> Self {
        Self {
            name,
            label,
            counters: RwLock::new(Vec::new()),
        }
    }

    pub fn increment(&self, value: &'static str) {
        let known = self
            .counters
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|(known, _)| same_label(known, value))
            .map(|(_, counter)| counter.clone());
        let counter = known.unwrap_or_else(|| {
            let counter = metrics::counter!(self.name, self.label => value);
            self.counters
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .push((value, counter.clone()));
            counter
        });
        counter.increment(1);
    }
}

/// Label values are `'static` strings, nearly always the same literal:
/// compared by address first.
pub fn same_label(a: &'static str, b: &'static str) -> bool {
    std::ptr::eq(a, b) || a == b
}
