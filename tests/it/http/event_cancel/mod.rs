//! Cancelling an event (also while buyers race it), and the tickets on the
//! order page.

mod cancel;
mod tickets;

use std::{collections::BTreeSet, sync::Arc};

use base64::Engine as _;
use reqwest::StatusCode;
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use stampede::{
    domain::{Email, IdempotencyKey, Quantity},
    error::AppError,
    sale::{self, Purchase, PurchaseRequest},
};
use tokio::sync::Barrier;
use uuid::Uuid;

use crate::{
    common::{self, forms::with_csrf, locks, organizer::*, *},
    http::support::*,
};
