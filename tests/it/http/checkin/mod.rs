//! Check-in at the door: staff links, the scanner page, the organizer API's
//! redeem, search and check-in list, and who may reach each of them. Every
//! answer is checked against the tickets table.

mod api;
mod door;
mod lists;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use stampede::clock::Clock as _;
use time::{Duration as Span, OffsetDateTime, format_description::well_known::Rfc3339};
use uuid::Uuid;

use crate::{
    common::{checkin::*, organizer::*, *},
    http::support::*,
};

fn rfc3339(value: &Value) -> OffsetDateTime {
    OffsetDateTime::parse(value.as_str().unwrap(), &Rfc3339).unwrap()
}

async fn page(resp: reqwest::Response) -> String {
    assert_eq!(resp.status(), StatusCode::OK);
    resp.text().await.unwrap()
}
