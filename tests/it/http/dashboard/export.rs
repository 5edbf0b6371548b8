//! The CSV export.

use super::*;

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
        "order_id,created_at,email,ticket_type,quantity,unit_price_minor,currency,status,ticket_codes,payment,payment_intent,created_at_local"
    );
    let expected = db_orders(&pool, event).await;
    assert_eq!(records.len() - 1, expected.len());
    assert_eq!(expected.len(), 3);
    for (record, ((id, created_at, email, tt, quantity, price, currency, status), codes)) in
        records[1..].iter().zip(&expected)
    {
        assert_eq!(record.len(), 12);
        // The same instant in the event's zone, which the cell names.
        let (local, zone) = record[11].split_once('[').unwrap();
        assert_eq!(OffsetDateTime::parse(local, &Rfc3339).unwrap(), *created_at);
        assert_eq!(zone, "UTC]");
        // Collected at the door: no Stripe payment.
        assert_eq!((&record[9], &record[10]), ("", ""));
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

/// `n` confirmed orders of the ticket type, written straight to the table
/// (the export reads nothing else): in threes with the same `created_at`,
/// so that pages break inside runs of equal times.
async fn many_orders(pool: &PgPool, ticket_type_id: Uuid, n: i64) {
    sqlx::query(
        "INSERT INTO orders (ticket_type_id, email, quantity, unit_price_minor, currency,
                             idempotency_key, created_at)
         SELECT $1, 'buyer' || i || '@example.org', 1, 2500, 'EUR', 'k' || i,
                timestamptz '2027-01-01 10:00Z' + (i / 3) * interval '1 second'
         FROM generate_series(1, $2) AS i",
    )
    .bind(ticket_type_id)
    .bind(n)
    .execute(pool)
    .await
    .unwrap();
}

/// Connections of the app's pool checked out now.
fn in_use(pool: &PgPool) -> u32 {
    pool.size() - pool.num_idle() as u32
}

#[sqlx::test]
async fn an_export_of_many_pages_has_every_order_once_in_order(pool: PgPool) {
    let (_app, org) = setup(&pool).await;
    let (event, tts) =
        create_event(&pool, &org, "Big", &[("Standing", "25.00", "EUR", 100, 4)]).await;
    // More than two pages of the export's reads.
    let n = 2 * stampede::web::EXPORT_ROWS_PER_PAGE + 101;
    many_orders(&pool, tts[0], n).await;
    let expected: Vec<Uuid> = sqlx::query_scalar(
        "SELECT o.id FROM orders o JOIN ticket_types t ON t.id = o.ticket_type_id
         WHERE t.event_id = $1 ORDER BY o.created_at, o.id",
    )
    .bind(event)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(expected.len() as i64, n);
    let records = download_csv(&org, event).await;
    let got: Vec<Uuid> = records[1..].iter().map(|r| r[0].parse().unwrap()).collect();
    assert_eq!(got, expected, "every order once, oldest first");
}

/// A client that asks for an export and reads nothing: the export holds
/// no pool connection while it waits on the client, and is cut off after
/// the stall timeout, which frees the organizer's slot.
#[sqlx::test]
async fn a_stalled_export_holds_no_connection_and_its_slot_frees(pool: PgPool) {
    let limits = stampede::web::Limits {
        export_stall: std::time::Duration::from_secs(1),
        ..stampede::web::Limits::default()
    };
    let app = TestApp::spawn_with_limits(pool.clone(), limits).await;
    let org = app.organizer("stall@example.org").await;
    let (event, tts) = create_event(
        &pool,
        &org,
        "Stall",
        &[("Standing", "25.00", "EUR", 100, 4)],
    )
    .await;
    // Megabytes of CSV: far more than the socket buffers of a reader with a
    // small receive buffer, and the export's chunks ahead, hold.
    many_orders(&pool, tts[0], 30_000).await;

    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(app.addr).await.unwrap();
    let request = format!(
        "GET /organizer/events/{event}/orders.csv HTTP/1.1\r\nhost: {}\r\ncookie: {}\r\n\r\n",
        app.addr,
        org.cookie_header()
    );
    tokio::io::AsyncWriteExt::write_all(&mut stream, request.as_bytes())
        .await
        .unwrap();
    let mut head = [0u8; 512];
    let read = tokio::io::AsyncReadExt::read(&mut stream, &mut head)
        .await
        .unwrap();
    let head = String::from_utf8_lossy(&head[..read]);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // From here on nothing is read. Once the buffers are full the export
    // waits on the client with no connection checked out, and it still
    // runs: the organizer's second export is refused.
    let mut waited = 0;
    while in_use(&pool) > 0 {
        waited += 1;
        assert!(waited < 1000, "a connection stays checked out");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let second = org
        .get(&format!("/organizer/events/{event}/orders.csv"))
        .await;
    assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
    // The stall timeout cuts it off and frees the slot.
    let mut tries = 0;
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let again = org
            .get(&format!("/organizer/events/{event}/orders.csv"))
            .await;
        if again.status() == StatusCode::OK {
            break;
        }
        assert_eq!(again.status(), StatusCode::TOO_MANY_REQUESTS);
        tries += 1;
        assert!(tries < 150, "the stalled export's slot was never freed");
    }
    drop(stream);
}
