//! The engine's tests, by theme; those that sell run on a database of
//! their own with tests/isolation/fixtures.sql (`roomy`: 10 seats).

mod deciding;
mod failures;
mod joining;
mod support;
mod worker;
