//! The engine: group commit per ticket type.
//!
//! On one hot ticket type every purchase needs the same row, and a
//! transaction that holds it waits for its own commit; so the row carries
//! about one commit at a time however many buyers wait. Here concurrent
//! purchases of one ticket type queue in process, and one worker per ticket
//! type takes what has arrived (up to `max_batch`) and sells it in ONE
//! transaction:
//! 1. lock the ticket type row (`SELECT ... FOR UPDATE`): other batches, in
//!    this or another instance, and cancellations wait here;
//! 2. read the event in a statement of its own, so that it sees a change
//!    (unpublished, window closed) committed while we waited for the lock;
//!    the purchases queued meanwhile join the batch here (up to
//!    `max_batch`): under a burst the first purchase's batch waits for the
//!    row while the rest of the wave arrives, and they no longer wait for
//!    its commit to start a batch of their own;
//! 3. read the orders of the batch's idempotency keys and the holdings of
//!    its buyers (for a holding event, also which buyers' mailboxes are
//!    proven, and what the others' addresses hold, under the addresses'
//!    locks: [`unproven`]), and decide each request in arrival order (first come
//!    first served; a request that does not fit is refused alone);
//! 4. write the orders, their tickets, the holdings and the stock in one
//!    statement whose stock `UPDATE ... WHERE remaining - total >= 0` and
//!    holdings upsert re-check the limits; anything unexpected rolls the
//!    batch back and each request runs alone ([`super::single`]);
//! 5. commit (durably: `synchronous_commit` stays on) and answer each.
//!
//! Behind the Redis gate, the first purchase of a wave has the worker open
//! its batch ahead, steps 1 and 2 while Redis answers ([`ahead`]).
//!
//! Collecting is [`worker`] (a queue and a worker per ticket type, the
//! purchases as [`job`]s, what joins a batch in [`intake`]); answering a
//! batch is [`seller`], its transaction [`transaction`], which decides
//! ([`decide`]) on the rows it reads and writes ([`rows`]).
//!
//! The queue is bounded: when it is full, a purchase gets 503 at once and
//! nothing is written.

mod ahead;
mod decide;
mod intake;
mod job;
mod rows;
mod seller;
mod settings;
#[cfg(test)]
mod tests;
mod transaction;
mod unproven;
mod worker;

pub use ahead::OnTheWay;
pub use settings::EngineSettings;
pub(super) use worker::Batcher;
