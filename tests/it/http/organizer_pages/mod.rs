//! Organizer pages: the overview, creating, editing and publishing events.

mod edits;
mod forms;
mod zones;

use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::{
    common::{forms::*, organizer::*, *},
    http::support::*,
};

// Organizer pages need a logged-in organizer (`TestApp::organizer`) and only
// show that organizer's events, so every event here is created through the
// organizer's own API token or form. Access control itself is tested in
// tests/organizer_access.rs.
