//! Sign-up (and confirming the address), log-in, sessions, log-out, the log-in rate limit, API tokens and
//! the `stampede organizer add` command.

mod email_confirmation;
mod sessions;
mod tokens;

use reqwest::StatusCode;
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use uuid::Uuid;

use crate::{
    common::{forms::*, *},
    http::support::*,
};
