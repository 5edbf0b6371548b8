//! The organizer's event dashboard: sales per ticket type, the searchable
//! and paginated order list, the CSV export and the sales chart, each
//! checked against the tables.

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

// ---------------------------------------------------------------------------
// The order list: search and pages
// ---------------------------------------------------------------------------

#[sqlx::test]
async fn order_search_matches_email_substrings_in_any_case_with_wildcards_taken_literally(
    pool: PgPool,
) {
    let (_app, org) = setup(&pool).await;
    let (event, tts) = create_event(
        &pool,
        &org,
        "Search",
        &[("Standing", "25.00", "EUR", 100, 10)],
    )
    .await;
    let (other_event, other_tts) = create_event(
        &pool,
        &org,
        "Other",
        &[("Standing", "25.00", "EUR", 100, 10)],
    )
    .await;
    let mut ids = std::collections::BTreeMap::new();
    for email in [
        "ada@example.org",
        "ada_b@example.org",
        "adam@example.net",
        "x%y@example.org",
        "bob@example.org",
    ] {
        ids.insert(email, buy(&pool, tts[0], 1, email).await);
    }
    // Another event's order never shows, even when it matches.
    let foreign = buy(&pool, other_tts[0], 1, "ada@example.org").await;

    let search = |q: &str| {
        let q: String = form_urlencoded::byte_serialize(q.as_bytes()).collect();
        format!("/organizer/events/{event}?q={q}")
    };
    let found = |body: &str| {
        let mut emails: Vec<&str> = order_ids(body)
            .into_iter()
            .map(|id| {
                *ids.iter()
                    .find(|(_, v)| **v == id)
                    .expect("an order of this event")
                    .0
            })
            .collect();
        emails.sort_unstable();
        emails
    };

    let all = page(&org, &search("")).await;
    assert_eq!(found(&all).len(), 5);
    assert!(!order_ids(&all).contains(&foreign));
    assert!(all.contains("5 orders"), "{all}");

    let body = page(&org, &search("  ADA ")).await;
    assert_eq!(
        found(&body),
        ["ada@example.org", "ada_b@example.org", "adam@example.net"]
    );
    assert!(body.contains("3 orders matching “ADA”"), "{body}");
    assert!(body.contains("value=\"ADA\""), "{body}");

    // `_` and `%` are literal characters, not LIKE wildcards.
    assert_eq!(
        found(&page(&org, &search("_")).await),
        ["ada_b@example.org"]
    );
    assert_eq!(found(&page(&org, &search("%")).await), ["x%y@example.org"]);
    assert_eq!(found(&page(&org, &search("a_a")).await), Vec::<&str>::new());
    assert_eq!(found(&page(&org, &search("\\")).await), Vec::<&str>::new());
    assert_eq!(
        found(&page(&org, &search(".NET")).await),
        ["adam@example.net"]
    );

    let none = page(&org, &search("<script>nobody")).await;
    assert!(order_ids(&none).is_empty());
    assert!(none.contains("No orders match this search."), "{none}");
    assert!(none.contains("&lt;script&gt;nobody"), "{none}");
    assert!(!none.contains("<script>nobody"), "{none}");

    // The other event's dashboard has exactly its own order.
    let other = page(&org, &format!("/organizer/events/{other_event}")).await;
    assert_eq!(order_ids(&other), [foreign]);
}

#[sqlx::test]
async fn orders_come_fifty_a_page_newest_first_with_links_that_keep_the_search(pool: PgPool) {
    let (_app, org) = setup(&pool).await;
    let (event, tts) = create_event(
        &pool,
        &org,
        "Busy",
        &[("Standing", "25.00", "EUR", 500, 10)],
    )
    .await;
    for i in 0..120 {
        buy(&pool, tts[0], 1, &format!("buyer-{i:03}@example.org")).await;
    }
    // One order a minute, buyer-000 first; one tie to exercise the id order.
    sqlx::query(
        "UPDATE orders o SET created_at = '2026-01-01T00:00:00Z'::timestamptz + s.n * interval '1 minute'
         FROM (SELECT id, LEAST(row_number() OVER (ORDER BY email), 119) AS n FROM orders) s
         WHERE s.id = o.id",
    )
    .execute(&pool)
    .await
    .unwrap();
    let newest_first: Vec<Uuid> =
        sqlx::query_scalar("SELECT id FROM orders ORDER BY created_at DESC, id DESC")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(newest_first.len(), 120);

    let base = format!("/organizer/events/{event}");
    let href = |query: &str| format!("href=\"{base}?{query}#orders-heading\"");
    let mut seen = Vec::new();
    for (n, expected_rows) in [(1, 50), (2, 50), (3, 20)] {
        let body = page(&org, &format!("{base}?page={n}")).await;
        let ids = order_ids(&body);
        assert_eq!(ids.len(), expected_rows, "page {n}");
        assert!(body.contains(&format!("Page {n} of 3")), "page {n}");
        assert_eq!(
            body.contains(&format!(
                "rel=\"prev\" {}",
                href(&format!("page={}", n - 1))
            )),
            n > 1,
            "page {n}: previous link"
        );
        assert_eq!(
            body.contains(&format!(
                "rel=\"next\" {}",
                href(&format!("page={}", n + 1))
            )),
            n < 3,
            "page {n}: next link"
        );
        seen.extend(ids);
    }
    assert_eq!(
        seen, newest_first,
        "pages are newest first, without gaps or repeats"
    );
    let first = page(&org, &base).await;
    assert!(first.contains("buyer-119@example.org"));
    assert_eq!(order_ids(&first), newest_first[..50]);

    // Out of range or malformed pages land on the nearest real page.
    for (query, n) in [
        ("page=99", 3),
        ("page=0", 1),
        ("page=-2", 1),
        ("page=abc", 1),
    ] {
        let body = page(&org, &format!("{base}?{query}")).await;
        assert!(body.contains(&format!("Page {n} of 3")), "{query}");
    }

    // A search is paginated too, and its links keep it.
    let body = page(&org, &format!("{base}?q=BUYER-0")).await;
    assert!(body.contains("100 orders matching “BUYER-0”"), "{body}");
    assert_eq!(order_ids(&body).len(), 50);
    assert!(
        body.contains(&format!("rel=\"next\" {}", href("q=BUYER-0&amp;page=2"))),
        "{body}"
    );
    let body = page(&org, &format!("{base}?q=BUYER-0&page=2")).await;
    assert!(
        body.contains(&format!("rel=\"prev\" {}", href("q=BUYER-0&amp;page=1"))),
        "{body}"
    );
    assert!(!body.contains("rel=\"next\""), "{body}");
    assert!(body.contains("buyer-000@example.org"));
    assert!(!body.contains("buyer-100@example.org"));

    // Exactly one page: no pagination at all.
    let body = page(&org, &format!("{base}?q=buyer-11")).await;
    assert_eq!(order_ids(&body).len(), 10);
    assert!(!body.contains("class=\"pagination\""), "{body}");
}

#[sqlx::test]
async fn order_rows_show_time_email_type_quantity_status_total_and_link(pool: PgPool) {
    let (_app, org) = setup(&pool).await;
    let (event, tts) =
        create_event(&pool, &org, "Rows", &[("Balcony", "40.00", "EUR", 10, 4)]).await;
    let confirmed = buy(&pool, tts[0], 3, "ada@example.org").await;
    let cancelled = buy_and_cancel(&pool, tts[0], 1, "bob@example.org").await;
    set_created_at(&pool, confirmed, datetime!(2026-05-01 18:30 UTC)).await;

    let body = page(&org, &format!("/organizer/events/{event}")).await;
    let row = slice(&body, &format!("data-order=\"{confirmed}\""), "</tr>");
    for expected in [
        "datetime=\"2026-05-01T18:30:00Z\"",
        "Fri 1 May 2026, 18:30 UTC",
        "<td>ada@example.org</td>",
        "<td>Balcony</td>",
        "<td class=\"num\">3</td>",
        "confirmed",
        "120.00 EUR",
        &format!("href=\"/orders/{confirmed}\""),
    ] {
        assert!(row.contains(expected), "{expected:?} not in {row}");
    }
    let row = slice(&body, &format!("data-order=\"{cancelled}\""), "</tr>");
    assert!(row.contains("cancelled"), "{row}");
    // The order page behind the link is the buyer's page.
    let resp = org.get(&format!("/orders/{confirmed}")).await;
    assert_eq!(resp.status(), StatusCode::OK);
}

// ---------------------------------------------------------------------------
// CSV export
// ---------------------------------------------------------------------------

type CsvOrder = (
    Uuid,
    OffsetDateTime,
    String,
    String,
    i32,
    i64,
    String,
    String,
);

async fn db_orders(pool: &PgPool, event: Uuid) -> Vec<(CsvOrder, String)> {
    let orders: Vec<CsvOrder> = sqlx::query_as(
        "SELECT o.id, o.created_at, o.email, t.name, o.quantity, o.unit_price_minor, o.currency, o.status
         FROM orders o JOIN ticket_types t ON t.id = o.ticket_type_id
         WHERE t.event_id = $1 ORDER BY o.created_at, o.id",
    )
    .bind(event)
    .fetch_all(pool)
    .await
    .unwrap();
    let mut out = Vec::new();
    for order in orders {
        let codes: Vec<String> =
            sqlx::query_scalar("SELECT code FROM tickets WHERE order_id = $1 ORDER BY position")
                .bind(order.0)
                .fetch_all(pool)
                .await
                .unwrap();
        assert_eq!(codes.len(), order.4 as usize);
        out.push((order, codes.join(" ")));
    }
    out
}

async fn download_csv(org: &Organizer, event: Uuid) -> Vec<csv::StringRecord> {
    let resp = org
        .get(&format!("/organizer/events/{event}/orders.csv"))
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let header = |name: &str| resp.headers()[name].to_str().unwrap().to_owned();
    assert_eq!(header("content-type"), "text/csv; charset=utf-8");
    assert_eq!(
        header("content-disposition"),
        format!("attachment; filename=\"orders-{event}.csv\"")
    );
    assert_eq!(header("cache-control"), "no-store");
    let body = resp.bytes().await.unwrap();
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(&body[..]);
    reader.records().map(|r| r.unwrap()).collect()
}

#[sqlx::test]
async fn csv_export_has_every_order_of_the_event_with_its_ticket_codes(pool: PgPool) {
    let (_app, org) = setup(&pool).await;
    let (event, tts) = create_event(
        &pool,
        &org,
        "Export",
        &[
            ("Standing, front", "25.00", "EUR", 100, 10),
            ("VIP \"gold\"", "99.00", "USD", 10, 4),
        ],
    )
    .await;
    let (other, other_tts) =
        create_event(&pool, &org, "Other", &[("Standing", "5", "EUR", 10, 4)]).await;
    buy(&pool, tts[0], 3, "ada@example.org").await;
    buy(&pool, tts[1], 2, "bob@example.org").await;
    buy_and_cancel(&pool, tts[0], 1, "cyd@example.org").await;
    buy(&pool, other_tts[0], 1, "ada@example.org").await;

    let records = download_csv(&org, event).await;
    assert_eq!(
        records[0].iter().collect::<Vec<_>>().join(","),
        "order_id,created_at,email,ticket_type,quantity,unit_price_minor,currency,status,ticket_codes"
    );
    let expected = db_orders(&pool, event).await;
    assert_eq!(records.len() - 1, expected.len());
    assert_eq!(expected.len(), 3);
    for (record, ((id, created_at, email, tt, quantity, price, currency, status), codes)) in
        records[1..].iter().zip(&expected)
    {
        assert_eq!(record.len(), 9);
        assert_eq!(record[0], id.to_string());
        assert_eq!(
            OffsetDateTime::parse(&record[1], &Rfc3339).unwrap(),
            *created_at
        );
        assert!(record[1].ends_with('Z'), "{}", &record[1]);
        assert_eq!(&record[2], email);
        assert_eq!(&record[3], tt);
        assert_eq!(record[4], quantity.to_string());
        assert_eq!(record[5], price.to_string());
        assert_eq!(&record[6], currency);
        assert_eq!(&record[7], status);
        assert_eq!(&record[8], codes);
        assert_eq!(record[8].split(' ').count(), *quantity as usize);
    }
    assert_eq!(&records[3][7], "cancelled");

    // An event without orders exports just the header.
    let (empty, _) = create_event(&pool, &org, "Empty", &[("Standing", "5", "EUR", 10, 4)]).await;
    assert_eq!(download_csv(&org, empty).await.len(), 1);
    assert_eq!(download_csv(&org, other).await.len(), 2);
}

#[sqlx::test]
async fn csv_export_neutralises_cells_that_spreadsheets_would_run_as_formulas(pool: PgPool) {
    let (_app, org) = setup(&pool).await;
    let names = [
        "=HYPERLINK(\"http://evil.example\",\"click\")",
        "@SUM(1+1)",
        "+1 guest",
        "-5 discount",
    ];
    let rows: Vec<Row<'_>> = names.iter().map(|n| (*n, "10.00", "EUR", 10, 4)).collect();
    let (event, tts) = create_event(&pool, &org, "Formulas", &rows).await;
    let emails = [
        "=cmd@example.org",
        "-x@example.org",
        "+y@example.org",
        "plain@example.org",
    ];
    for (tt, email) in tts.iter().zip(emails) {
        buy(&pool, *tt, 1, email).await;
    }

    let records = download_csv(&org, event).await;
    let expected = db_orders(&pool, event).await;
    assert_eq!(records.len(), 5);
    for (record, ((_, _, email, tt, ..), _)) in records[1..].iter().zip(&expected) {
        let guarded = |raw: &str| {
            if raw.starts_with(['=', '+', '-', '@']) {
                format!("'{raw}")
            } else {
                raw.to_owned()
            }
        };
        assert_eq!(record[2], guarded(email));
        assert_eq!(record[3], guarded(tt));
    }
    // No cell of the file starts like a formula.
    for record in &records {
        for field in record {
            assert!(
                !field.starts_with(['=', '+', '-', '@', '\t', '\r']),
                "{field:?} in {record:?}"
            );
        }
    }
    assert!(
        records
            .iter()
            .any(|r| &r[3] == "'=HYPERLINK(\"http://evil.example\",\"click\")")
    );
    assert!(records.iter().any(|r| &r[2] == "'=cmd@example.org"));
    assert!(records.iter().any(|r| &r[2] == "plain@example.org"));
}

// ---------------------------------------------------------------------------
// The sales chart
// ---------------------------------------------------------------------------

struct Point {
    at: OffsetDateTime,
    sold: i64,
    cumulative: i64,
}

fn chart_points(body: &str) -> Vec<Point> {
    let svg = slice(body, "<svg", "</svg>");
    let at = attrs(svg, "data-at");
    let sold = attrs(svg, "data-sold");
    let cumulative = attrs(svg, "data-cumulative");
    assert_eq!(svg.matches("<circle").count(), at.len());
    at.iter()
        .zip(sold)
        .zip(cumulative)
        .map(|((at, sold), cumulative)| Point {
            at: OffsetDateTime::parse(at, &Rfc3339).unwrap(),
            sold: sold.parse().unwrap(),
            cumulative: cumulative.parse().unwrap(),
        })
        .collect()
}

#[sqlx::test]
async fn chart_has_one_point_per_hour_and_ends_at_the_tickets_sold(pool: PgPool) {
    let (_app, org) = setup(&pool).await;
    let (event, tts) = create_event(
        &pool,
        &org,
        "Chart",
        &[("Standing", "25.00", "EUR", 100, 10)],
    )
    .await;
    let day = datetime!(2026-03-10 00:00 UTC);
    for (quantity, at) in [
        (2, day + Span::minutes(10 * 60 + 5)),
        (3, day + Span::minutes(10 * 60 + 40)),
        (1, day + Span::minutes(12 * 60 + 10)),
        (4, day + Span::minutes(33 * 60 + 59)), // the next day, 09:59
    ] {
        let id = buy(&pool, tts[0], quantity, &format!("q{quantity}@example.org")).await;
        set_created_at(&pool, id, at).await;
    }
    // A cancelled order counts nowhere.
    let cancelled = buy_and_cancel(&pool, tts[0], 5, "gone@example.org").await;
    set_created_at(&pool, cancelled, day + Span::hours(11)).await;

    let body = page(&org, &format!("/organizer/events/{event}")).await;
    let svg = slice(&body, "<svg", "</svg>");
    assert!(svg.contains("role=\"img\""), "{svg}");
    assert!(
        svg.contains("aria-label=\"Tickets sold over time: 10 in total"),
        "{svg}"
    );
    assert!(svg.contains("<title>Tickets sold over time"), "{svg}");
    assert!(svg.contains("data-bucket=\"hour\""), "{svg}");
    assert!(svg.contains("data-total=\"10\""), "{svg}");

    // 23 h 54 min of sales: hourly buckets 10:00 .. 09:00 the next day.
    let points = chart_points(&body);
    assert_eq!(points.len(), 24);
    for (i, point) in points.iter().enumerate() {
        assert_eq!(point.at, day + Span::hours(10 + i as i64));
    }
    let sold: Vec<i64> = points.iter().map(|p| p.sold).collect();
    let mut expected = vec![0; 24];
    expected[0] = 5; // 10:05 and 10:40
    expected[2] = 1; // 12:10
    expected[23] = 4; // 09:59 the next day
    assert_eq!(sold, expected);
    let mut running = 0;
    for point in &points {
        running += point.sold;
        assert_eq!(point.cumulative, running);
    }
    assert_eq!(
        points.last().unwrap().cumulative,
        common::sold(&pool, tts[0]).await
    );
    let polyline = attrs(svg, "points");
    assert_eq!(polyline.len(), 1);
    // The line rises from zero at the first bucket, then one vertex per bucket.
    let vertices: Vec<(f64, f64)> = polyline[0]
        .split(' ')
        .map(|v| {
            let (x, y) = v.split_once(',').unwrap();
            (x.parse().unwrap(), y.parse().unwrap())
        })
        .collect();
    assert_eq!(vertices.len(), 25);
    assert_eq!(
        vertices[0].0, vertices[1].0,
        "the zero point sits on the first bucket"
    );
    assert!(
        vertices.iter().all(|v| v.1 <= vertices[0].1),
        "the zero point is the lowest: {vertices:?}"
    );
    // Axis labels: the first and last bucket, and the ticket counts.
    assert!(svg.contains(">10 Mar 10:00</text>"), "{svg}");
    assert!(svg.contains(">11 Mar 09:00</text>"), "{svg}");
    assert!(
        svg.contains(">10</text>") && svg.contains(">0</text>"),
        "{svg}"
    );
}

#[sqlx::test]
async fn chart_buckets_follow_the_span_of_the_sales(pool: PgPool) {
    let (_app, org) = setup(&pool).await;
    let start = datetime!(2026-03-10 10:00:30 UTC);
    // (offsets from the first sale, expected bucket, expected points)
    let cases: [(&[Span], &str, usize); 3] = [
        (
            &[Span::ZERO, Span::minutes(3), Span::seconds(9 * 60 + 20)],
            "minute",
            10,
        ),
        (&[Span::ZERO, Span::hours(30)], "hour", 31),
        (&[Span::ZERO, Span::days(20), Span::days(40)], "day", 41),
    ];
    for (n, (offsets, bucket, count)) in cases.iter().enumerate() {
        let (event, tts) = create_event(
            &pool,
            &org,
            &format!("Span {n}"),
            &[("Standing", "1", "EUR", 100, 10)],
        )
        .await;
        for (i, offset) in offsets.iter().enumerate() {
            let id = buy(&pool, tts[0], 1, &format!("b{i}@example.org")).await;
            set_created_at(&pool, id, start + *offset).await;
        }
        let body = page(&org, &format!("/organizer/events/{event}")).await;
        assert!(
            body.contains(&format!("data-bucket=\"{bucket}\"")),
            "case {n}"
        );
        let points = chart_points(&body);
        assert_eq!(points.len(), *count, "case {n}");
        assert!(points.len() <= 60);
        assert_eq!(points.last().unwrap().cumulative, offsets.len() as i64);
    }
}

#[sqlx::test]
async fn chart_shows_an_empty_state_before_the_first_sale(pool: PgPool) {
    let (_app, org) = setup(&pool).await;
    let (event, tts) = create_event(
        &pool,
        &org,
        "Quiet",
        &[("Standing", "25.00", "EUR", 100, 10)],
    )
    .await;
    let body = page(&org, &format!("/organizer/events/{event}")).await;
    assert!(body.contains("No tickets sold yet"), "{body}");
    assert!(!body.contains("<svg"), "{body}");
    assert!(body.contains("No orders yet."), "{body}");

    // A cancelled order is not a sale.
    let order = buy_and_cancel(&pool, tts[0], 1, "ada@example.org").await;
    let body = page(&org, &format!("/organizer/events/{event}")).await;
    assert!(body.contains("No tickets sold yet"), "{body}");
    assert_eq!(order_ids(&body), [order]);
}

// ---------------------------------------------------------------------------
// Status bar, navigation, access
// ---------------------------------------------------------------------------

#[sqlx::test]
async fn status_bar_publishes_edits_and_cancels_from_the_dashboard(pool: PgPool) {
    let (_app, org) = setup(&pool).await;
    let (event, tts) = create_event(
        &pool,
        &org,
        "Status",
        &[("Standing", "25.00", "EUR", 100, 10)],
    )
    .await;
    let order = buy(&pool, tts[0], 2, "ada@example.org").await;
    let path = format!("/organizer/events/{event}");

    let index = page(&org, "/organizer").await;
    assert!(index.contains(&format!("href=\"{path}\"")), "{index}");

    let body = page(&org, &path).await;
    let cancel_form = slice(&body, &format!("action=\"{path}/cancel\""), "</form>");
    assert!(cancel_form.contains("data-once"), "{cancel_form}");
    assert!(cancel_form.contains("data-confirm=\""), "{cancel_form}");
    let csrf_input = format!("name=\"{}\"", stampede::web::csrf::FIELD);
    assert!(cancel_form.contains(&csrf_input), "{cancel_form}");
    assert!(cancel_form.contains("Cancel event"), "{cancel_form}");
    assert!(
        body.contains(&format!("action=\"{path}/unpublish\"")),
        "{body}"
    );
    assert!(body.contains(&format!("href=\"{path}/edit\"")), "{body}");
    assert!(
        body.contains(&format!("href=\"{path}/orders.csv\"")),
        "{body}"
    );
    // Every POST form carries the CSRF field.
    assert_eq!(
        body.matches("method=\"post\"").count(),
        body.matches(&csrf_input).count()
    );

    // Unpublish, publish: back on the dashboard each time.
    for (action, status) in [("unpublish", "draft"), ("publish", "published")] {
        let resp = org.post_form(&format!("{path}/{action}"), &[]).await;
        assert_eq!(resp.status(), StatusCode::SEE_OTHER);
        assert_eq!(location(&resp), path);
        let body = page(&org, &path).await;
        assert!(
            body.contains(&format!("<strong>{status}</strong>")),
            "{body}"
        );
    }

    // The edit form lives at /edit and posts there.
    let edit = page(&org, &format!("{path}/edit")).await;
    assert!(edit.contains(&format!("action=\"{path}/edit\"")), "{edit}");
    assert!(edit.contains(&format!("href=\"{path}\"")), "{edit}");
    let starts_at = form_time(common::now() + Span::days(30));
    let opens_at = form_time(common::now() - Span::hours(1));
    let resp = org
        .post_form(
            &format!("{path}/edit"),
            &[
                ("title", "Status, renamed"),
                ("venue", "Hall 2"),
                ("description", ""),
                ("starts_at", &starts_at),
                ("sale_opens_at", &opens_at),
                ("tt_id_0", &tts[0].to_string()),
                ("tt_name_0", "Standing"),
                ("tt_price_0", "25.00"),
                ("tt_currency_0", "EUR"),
                ("tt_capacity_0", "120"),
                ("tt_max_per_order_0", "10"),
                ("tt_max_per_buyer_0", "10"),
            ],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), path);
    let body = page(&org, &path).await;
    assert!(body.contains("<h1>Status, renamed</h1>"), "{body}");
    assert_eq!(
        cell(slice(&body, "data-ticket-type", "</tr>"), "remaining"),
        "118"
    );

    // Cancel: every order is cancelled and the bar offers nothing more.
    let resp = org.post_form(&format!("{path}/cancel"), &[]).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), path);
    let body = page(&org, &path).await;
    assert!(body.contains("<strong>cancelled</strong>"), "{body}");
    assert!(
        !body.contains(&format!("action=\"{path}/cancel\"")),
        "{body}"
    );
    assert!(!body.contains(&format!("href=\"{path}/edit\"")), "{body}");
    assert!(!body.contains("/publish\""), "{body}");
    let row = slice(&body, "data-ticket-type", "</tr>");
    assert_eq!(cell(row, "sold"), "0");
    assert_eq!(cell(row, "remaining"), "120");
    assert!(slice(&body, &format!("data-order=\"{order}\""), "</tr>").contains("cancelled"));
}

#[sqlx::test]
async fn another_organizer_gets_not_found_for_the_dashboard_and_the_export(pool: PgPool) {
    let (app, owner) = setup(&pool).await;
    let (event, tts) = create_event(
        &pool,
        &owner,
        "Mine",
        &[("Standing", "25.00", "EUR", 100, 10)],
    )
    .await;
    buy(&pool, tts[0], 2, "ada@example.org").await;
    let intruder = app.organizer("b@example.org").await;

    for path in [
        format!("/organizer/events/{event}"),
        format!("/organizer/events/{event}?q=ada&page=1"),
        format!("/organizer/events/{event}/orders.csv"),
        format!("/organizer/events/{}", Uuid::new_v4()),
        format!("/organizer/events/{}/orders.csv", Uuid::new_v4()),
        "/organizer/events/not-an-id".to_owned(),
        "/organizer/events/not-an-id/orders.csv".to_owned(),
    ] {
        let resp = intruder.get(&path).await;
        assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{path}");
        let body = resp.text().await.unwrap();
        assert!(!body.contains("ada@example.org"), "{path}");
    }
    // Still there for its owner.
    let resp = owner
        .get(&format!("/organizer/events/{event}/orders.csv"))
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(resp.text().await.unwrap().contains("ada@example.org"));
}

#[sqlx::test]
async fn visitors_who_are_not_logged_in_are_sent_to_log_in(pool: PgPool) {
    let (app, org) = setup(&pool).await;
    let (event, _) = create_event(
        &pool,
        &org,
        "Private",
        &[("Standing", "25.00", "EUR", 100, 10)],
    )
    .await;
    for path in [
        format!("/organizer/events/{event}"),
        format!("/organizer/events/{event}/orders.csv"),
    ] {
        let resp = app.client.get(app.url(&path)).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::SEE_OTHER, "{path}");
        let next: String = form_urlencoded::byte_serialize(path.as_bytes()).collect();
        assert_eq!(location(&resp), format!("/login?next={next}"), "{path}");
    }
}
