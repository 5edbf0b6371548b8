//! The JSON API: events, orders, and errors in one shape.

mod events;
mod orders;
mod requests;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sqlx::PgPool;
use time::{Duration as Span, OffsetDateTime};
use uuid::Uuid;

use crate::{
    common::{organizer::*, *},
    http::support::*,
};

fn api_event(title: &str, status: Option<&str>) -> Value {
    let mut body = json!({
        "title": title,
        "venue": "API hall",
        "description": "Made by a script.",
        "starts_at": "2030-03-01T19:30:00Z",
        "sale_opens_at": "2020-01-01T10:00:00Z",
        // Prices collected at the door: this server has no Stripe.
        "payment": "offline",
        "ticket_types": [
            {"name": "Standing", "price_minor": 2500, "currency": "EUR", "capacity": 100,
             "max_per_order": 4, "max_per_buyer": 6},
            {"name": "Seated", "price_minor": 4000, "currency": "eur", "capacity": 50},
        ],
    });
    if let Some(status) = status {
        body["status"] = json!(status);
    }
    body
}
