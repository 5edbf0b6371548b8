//! The organizer's event dashboard: sales per ticket type, the searchable
//! and paginated order list, the CSV export and the sales chart, each
//! checked against the tables. The helpers and the sales table here; a
//! module per part of the page.

mod chart;
mod export;
mod orders;
mod status;

use crate::common::{self, Organizer, TestApp, capacity_and_remaining, form_time, location};
use reqwest::StatusCode;
use sqlx::PgPool;
use stampede::{
    domain::{Email, IdempotencyKey, Quantity, format_price},
    sale::{self, PurchaseRequest},
};
use time::{
    Duration as Span, OffsetDateTime, format_description::well_known::Rfc3339, macros::datetime,
};
use uuid::Uuid;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// A ticket type row of the organizer form: name, price, currency, capacity,
/// max per order (and per buyer).
type Row<'a> = (&'a str, &'a str, &'a str, i32, i32);

/// Create a published, on-sale event through the organizer's form and
/// return its id and its ticket types' ids in form order.
async fn create_event(
    pool: &PgPool,
    org: &Organizer,
    title: &str,
    rows: &[Row<'_>],
) -> (Uuid, Vec<Uuid>) {
    let now = common::now();
    let mut fields: Vec<(String, String)> = vec![
        ("title".into(), title.into()),
        ("venue".into(), "Hall 1".into()),
        ("description".into(), "Doors at 19:00.".into()),
        ("starts_at".into(), form_time(now + Span::days(30))),
        ("sale_opens_at".into(), form_time(now - Span::hours(1))),
        ("status".into(), "published".into()),
        // No Stripe on this server: the organizer collects the money.
        ("payment".into(), "offline".into()),
    ];
    for (i, (name, price, currency, capacity, max)) in rows.iter().enumerate() {
        fields.extend([
            (format!("tt_name_{i}"), (*name).to_owned()),
            (format!("tt_price_{i}"), (*price).to_owned()),
            (format!("tt_currency_{i}"), (*currency).to_owned()),
            (format!("tt_capacity_{i}"), capacity.to_string()),
            (format!("tt_max_per_order_{i}"), max.to_string()),
            (format!("tt_max_per_buyer_{i}"), max.to_string()),
        ]);
    }
    let borrowed: Vec<(&str, &str)> = fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let resp = org.post_form("/organizer/events", &borrowed).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER, "create {title}");
    let location = location(&resp);
    let id = Uuid::parse_str(location.strip_prefix("/organizer/events/").unwrap()).unwrap();
    let ticket_types: Vec<Uuid> =
        sqlx::query_scalar("SELECT id FROM ticket_types WHERE event_id = $1 ORDER BY position")
            .bind(id)
            .fetch_all(pool)
            .await
            .unwrap();
    assert_eq!(ticket_types.len(), rows.len());
    (id, ticket_types)
}

/// Start the app and log in organizer a@example.org.
async fn setup(pool: &PgPool) -> (TestApp, Organizer) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("a@example.org").await;
    (app, org)
}

/// Buy, then cancel as the buyer (with the order's cancel secret).
async fn buy_and_cancel(pool: &PgPool, ticket_type_id: Uuid, quantity: i64, email: &str) -> Uuid {
    let request = PurchaseRequest {
        event_id: None,
        ticket_type_id: ticket_type_id.into(),
        quantity: Quantity::new(quantity).unwrap(),
        email: Email::parse(email).unwrap(),
        idempotency_key: IdempotencyKey::generate(),
        pass: None,
        queue_entry: None,
        presale_code: None,
        client: None,
    };
    let purchase = sale::purchase(pool, common::now(), &request).await.unwrap();
    let id = purchase.order().id;
    sale::cancel(pool, common::now(), id, purchase.cancel_secret())
        .await
        .unwrap();
    id.get()
}

async fn buy(pool: &PgPool, ticket_type_id: Uuid, quantity: i64, email: &str) -> Uuid {
    let request = PurchaseRequest {
        event_id: None,
        ticket_type_id: ticket_type_id.into(),
        quantity: Quantity::new(quantity).unwrap(),
        email: Email::parse(email).unwrap_or_else(|e| panic!("{email}: {e}")),
        idempotency_key: IdempotencyKey::generate(),
        pass: None,
        queue_entry: None,
        presale_code: None,
        client: None,
    };
    sale::purchase(pool, common::now(), &request)
        .await
        .unwrap_or_else(|e| panic!("buy {quantity} for {email}: {e}"))
        .order()
        .id
        .get()
}

async fn set_created_at(pool: &PgPool, order_id: Uuid, at: OffsetDateTime) {
    sqlx::query("UPDATE orders SET created_at = $2 WHERE id = $1")
        .bind(order_id)
        .bind(at)
        .execute(pool)
        .await
        .unwrap();
}

async fn page(org: &Organizer, path: &str) -> String {
    let resp = org.get(path).await;
    assert_eq!(resp.status(), StatusCode::OK, "GET {path}");
    resp.text().await.unwrap()
}

/// The text from `start` (inclusive) to the next `end` (exclusive).
fn slice<'a>(html: &'a str, start: &str, end: &str) -> &'a str {
    let from = html
        .find(start)
        .unwrap_or_else(|| panic!("{start:?} not in page:\n{html}"));
    let rest = &html[from..];
    let to = rest
        .find(end)
        .unwrap_or_else(|| panic!("{end:?} after {start:?} not in page"));
    &rest[..to]
}

/// The content of the `<td class="num {class}">` cell of a table row.
fn cell(row: &str, class: &str) -> String {
    let marker = format!("<td class=\"num {class}\">");
    slice(row, &marker, "</td>")[marker.len()..].to_owned()
}

/// The values of every `name="..."` attribute, in page order.
fn attrs<'a>(html: &'a str, name: &str) -> Vec<&'a str> {
    let marker = format!(" {name}=\"");
    html.match_indices(&marker)
        .map(|(i, _)| {
            let rest = &html[i + marker.len()..];
            &rest[..rest.find('"').unwrap()]
        })
        .collect()
}

fn order_ids(html: &str) -> Vec<Uuid> {
    attrs(html, "data-order")
        .into_iter()
        .map(|id| Uuid::parse_str(id).unwrap())
        .collect()
}

/// What the sales table should say for a ticket type, from the tables.
async fn expected_sales(pool: &PgPool, ticket_type_id: Uuid) -> (i64, i32, i32, String) {
    let (capacity, remaining) = capacity_and_remaining(pool, ticket_type_id).await;
    let revenue: Vec<(String, i64)> = sqlx::query_as(
        "SELECT currency, SUM(quantity * unit_price_minor)::int8 FROM orders
         WHERE ticket_type_id = $1 AND status = 'confirmed' GROUP BY currency ORDER BY currency",
    )
    .bind(ticket_type_id)
    .fetch_all(pool)
    .await
    .unwrap();
    let revenue = if revenue.is_empty() {
        "—".to_owned()
    } else {
        revenue
            .iter()
            .map(|(currency, minor)| format_price(*minor, currency))
            .collect::<Vec<_>>()
            .join("<br>")
    };
    (
        common::sold(pool, ticket_type_id).await,
        remaining,
        capacity,
        revenue,
    )
}

// ---------------------------------------------------------------------------
// Sales per ticket type
// ---------------------------------------------------------------------------

#[sqlx::test]
async fn sales_table_shows_sold_remaining_capacity_and_revenue_from_the_orders(pool: PgPool) {
    let (_app, org) = setup(&pool).await;
    let (event, tts) = create_event(
        &pool,
        &org,
        "Night of the Stampede",
        &[
            ("Standing", "25.00", "EUR", 100, 10),
            ("VIP", "99.50", "EUR", 20, 4),
            ("Student", "12.00", "USD", 50, 10),
            ("Crew", "0", "EUR", 10, 2),
        ],
    )
    .await;
    let (standing, vip, student, crew) = (tts[0], tts[1], tts[2], tts[3]);
    buy(&pool, standing, 2, "ada@example.org").await;
    buy(&pool, standing, 3, "bob@example.org").await;
    buy_and_cancel(&pool, standing, 4, "cyd@example.org").await;
    // A later price change applies to later orders only.
    sqlx::query("UPDATE ticket_types SET price_minor = 3000 WHERE id = $1")
        .bind(standing)
        .execute(&pool)
        .await
        .unwrap();
    buy(&pool, standing, 1, "dee@example.org").await;
    buy(&pool, vip, 4, "ada@example.org").await;
    buy(&pool, student, 5, "eve@example.org").await;

    let body = page(&org, &format!("/organizer/events/{event}")).await;
    let row = |id: Uuid| slice(&body, &format!("data-ticket-type=\"{id}\""), "</tr>").to_owned();

    for tt in [standing, vip, student, crew] {
        let (sold, remaining, capacity, revenue) = expected_sales(&pool, tt).await;
        let row = row(tt);
        assert_eq!(cell(&row, "sold"), sold.to_string(), "{row}");
        assert_eq!(cell(&row, "remaining"), remaining.to_string(), "{row}");
        assert_eq!(cell(&row, "capacity"), capacity.to_string(), "{row}");
        assert_eq!(cell(&row, "revenue"), revenue, "{row}");
        assert_eq!(i64::from(capacity - remaining), sold);
    }
    // The same numbers, worked out by hand.
    let standing_row = row(standing);
    assert_eq!(cell(&standing_row, "sold"), "6");
    assert_eq!(cell(&standing_row, "remaining"), "94");
    assert_eq!(cell(&standing_row, "revenue"), "155.00 EUR"); // 5 × 25.00 + 1 × 30.00
    assert_eq!(cell(&row(vip), "revenue"), "398.00 EUR");
    assert_eq!(cell(&row(student), "revenue"), "60.00 USD");
    assert_eq!(cell(&row(crew), "revenue"), "—");

    let totals = slice(&body, "<tr class=\"totals\">", "</tr>");
    assert_eq!(cell(totals, "sold"), "15");
    assert_eq!(cell(totals, "remaining"), "165");
    assert_eq!(cell(totals, "capacity"), "180");
    assert_eq!(cell(totals, "revenue"), "553.00 EUR<br>60.00 USD");
}

#[sqlx::test]
async fn free_tickets_show_zero_revenue_and_user_text_is_escaped(pool: PgPool) {
    let (_app, org) = setup(&pool).await;
    let (event, tts) = create_event(
        &pool,
        &org,
        "<script>alert('title')</script>",
        &[("<img src=x onerror=alert(1)>", "0", "EUR", 10, 2)],
    )
    .await;
    buy(&pool, tts[0], 2, "ada@example.org").await;
    let body = page(&org, &format!("/organizer/events/{event}")).await;
    assert_eq!(
        cell(slice(&body, "data-ticket-type", "</tr>"), "revenue"),
        "0.00 EUR"
    );
    assert!(
        body.contains("&lt;img src=x onerror=alert(1)&gt;"),
        "{body}"
    );
    assert!(
        body.contains("&lt;script&gt;alert('title')&lt;/script&gt;"),
        "{body}"
    );
    assert!(!body.contains("<img src=x"), "{body}");
    assert!(!body.contains("<script>alert"), "{body}");
}
