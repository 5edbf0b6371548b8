//! A sold-out answer waits for the sale: this instance's admitted
//! purchases of a ticket type, until Postgres has decided them.

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
    time::Duration,
};

use tokio::sync::watch;

use crate::domain::TicketTypeId;

/// A refusal waits this long at most for the admitted purchases of its
/// ticket type to be decided ([`SellingByType::settled`]).
const SETTLE_WAIT: Duration = Duration::from_secs(1);

/// This instance's admitted purchases of one ticket type.
#[derive(Debug, Default, Clone, Copy)]
struct Selling {
    /// Not decided by Postgres yet.
    in_flight: usize,
    /// Given back so far.
    given_back: u64,
}

impl Selling {
    /// One more in flight. Wakes no one: refusals wait for none in flight.
    fn admitted(&mut self) -> bool {
        self.in_flight += 1;
        false
    }

    /// One decided; whether to wake the refusals waiting for the sale:
    /// only when it was the last in flight. A burst's admitted purchases
    /// are decided together, and waking every waiter at each of them cost
    /// each waiter a poll per decided purchase (100 × 900 in a first wave).
    fn decided(&mut self, given_back: bool) -> bool {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.given_back += u64::from(given_back);
        self.in_flight == 0
    }
}

/// One admitted purchase until Postgres has decided it (and, if it did
/// not sell, until its counts are given back): refusals of its ticket
/// type wait for it ([`SellingByType::settled`]).
#[derive(Debug)]
pub(in crate::sale) struct InFlight {
    /// Its ticket type's purchases in flight.
    selling: watch::Sender<Selling>,
    given_back: bool,
}

impl InFlight {
    /// Its counts went back to Redis.
    pub(in crate::sale) fn given_back(mut self) {
        self.given_back = true;
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let given_back = self.given_back;
        self.selling
            .send_if_modified(|selling| selling.decided(given_back));
    }
}

/// Per ticket type, this instance's admitted purchases that Postgres has
/// not decided yet.
#[derive(Debug, Default)]
pub(super) struct SellingByType(Mutex<HashMap<TicketTypeId, watch::Sender<Selling>>>);

impl SellingByType {
    /// An admitted purchase on its way to Postgres, until dropped.
    pub(super) fn in_flight(&self, ticket_type_id: TicketTypeId) -> InFlight {
        let selling = self.of_type(ticket_type_id);
        selling.send_if_modified(Selling::admitted);
        InFlight {
            selling,
            given_back: false,
        }
    }

    /// Wait until Postgres has decided this instance's admitted purchases
    /// of the type (within [`SETTLE_WAIT`]); whether any was given back
    /// meanwhile (Redis has stock again: worth asking again).
    ///
    /// Redis says "sold out" as soon as every ticket is admitted, before
    /// the admitted purchases commit. Answered at once, the refused come
    /// back at once, and under a burst their requests take the CPU that
    /// those commits need (the engine alone holds them until the batch
    /// commits). Held here, the refusal is also final: a ticket whose
    /// purchase fails is on sale again when it is given.
    pub(super) async fn settled(&self, ticket_type_id: TicketTypeId) -> bool {
        let mut selling = self.of_type(ticket_type_id).subscribe();
        let before = selling.borrow_and_update().given_back;
        let decided =
            tokio::time::timeout(SETTLE_WAIT, selling.wait_for(|now| now.in_flight == 0)).await;
        match decided {
            Ok(Ok(now)) => now.given_back != before,
            // Still selling after the wait: the refusal stands.
            _ => false,
        }
    }

    fn of_type(&self, id: TicketTypeId) -> watch::Sender<Selling> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(id)
            .or_default()
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::Selling;

    #[test]
    fn only_the_last_decided_purchase_wakes_the_waiting_refusals() {
        let mut selling = Selling::default();
        for _ in 0..3 {
            assert!(!selling.admitted(), "an admission wakes no one");
        }
        assert!(!selling.decided(false));
        assert!(!selling.decided(true), "a give-back with others in flight");
        assert_eq!(selling.given_back, 1, "the give-back is counted at once");
        assert!(selling.decided(false), "the last one wakes them");
        assert_eq!(selling.in_flight, 0);
    }
}
