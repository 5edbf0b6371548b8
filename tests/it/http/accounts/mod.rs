//! Sign-up, log-in, sessions, log-out, the log-in rate limit, API tokens and
//! the `stampede organizer add` command.

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
