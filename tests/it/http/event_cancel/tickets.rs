//! The tickets on the order page.

use super::*;

/// The tickets an order page shows: (code, QR image data URI), in order.
/// The page may print a code in groups for reading aloud ("ABCD EFGH …");
/// the code is what remains without the spaces.
fn tickets_on_page(html: &str) -> Vec<(String, String)> {
    html.split("<li class=\"ticket\">")
        .skip(1)
        .map(|item| {
            let item = &item[..item.find("</li>").expect("a closed ticket item")];
            let src_marker = "src=\"";
            let src_start = item.find(src_marker).expect("a QR <img>") + src_marker.len();
            let src = &item[src_start..src_start + item[src_start..].find('"').unwrap()];
            assert!(item.starts_with("<img "), "{item}");
            let code_marker = "<code class=\"ticket-code\">";
            let code_start = item.find(code_marker).expect("a ticket code") + code_marker.len();
            let shown = &item[code_start..code_start + item[code_start..].find('<').unwrap()];
            let code: String = shown.split_whitespace().collect();
            (code, src.to_owned())
        })
        .collect()
}

/// The order page as its buyer sees it: with the cancel secret the
/// purchase returned (the codes show only with a proof).
async fn order_page(app: &TestApp, order_id: Uuid, secret: &str) -> String {
    let resp = app
        .client
        .get(app.url(&format!("/orders/{order_id}?s={secret}")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    resp.text().await.unwrap()
}

#[sqlx::test]
async fn the_order_page_shows_one_ticket_per_seat_with_a_distinct_code_and_a_qr_image(
    pool: PgPool,
) {
    let (app, fixture) = app_with_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let (order, secret) =
        api_buy_with_secret(&app, fixture.ticket_type_id(), 3, "ada@example.org").await;

    let page = order_page(&app, order, &secret).await;
    let tickets = tickets_on_page(&page);
    assert_eq!(tickets.len(), 3, "{page}");
    for n in 1..=3 {
        assert!(page.contains(&format!("Ticket {n} of 3")), "{page}");
    }
    let codes: Vec<String> = tickets.iter().map(|(code, _)| code.clone()).collect();
    for code in &codes {
        assert_eq!(code.len(), 32, "{code}");
        assert!(
            code.bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_uppercase()),
            "{code}"
        );
    }
    assert_eq!(
        codes.iter().collect::<BTreeSet<_>>().len(),
        3,
        "codes repeat: {codes:?}"
    );
    assert_eq!(codes, ticket_codes(&pool, order).await);

    // The order id alone, or a wrong secret, shows the order and no code.
    for path in [
        format!("/orders/{order}"),
        format!("/orders/{order}?s={}", "A".repeat(43)),
        format!("/orders/{order}?t={}", "A".repeat(43)),
    ] {
        let page = page_text(&app, &path).await;
        assert!(page.contains("You have 3 tickets"), "{page}");
        assert!(tickets_on_page(&page).is_empty(), "{path}: {page}");
        for code in &codes {
            assert!(!page.contains(&code[..8]), "{path}: {page}");
        }
    }

    let mut images = BTreeSet::new();
    for (code, src) in &tickets {
        let data = src
            .strip_prefix("data:image/svg+xml;base64,")
            .unwrap_or_else(|| panic!("ticket {code}: image {src}"));
        let svg = base64::engine::general_purpose::STANDARD
            .decode(data)
            .expect("base64 image");
        let svg = String::from_utf8(svg).expect("an SVG is text");
        assert!(svg.contains("<svg"), "ticket {code}: {svg}");
        images.insert(svg);
    }
    assert_eq!(images.len(), 3, "two tickets share a QR code");

    // A cancelled order shows no codes to scan.
    let resp = app
        .post_form(&format!("/orders/{order}/cancel"), &[("s", &secret)])
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let page = order_page(&app, order, &secret).await;
    assert!(tickets_on_page(&page).is_empty(), "{page}");
    assert!(!page.contains("ticket-code"), "{page}");
    assert!(!page.contains("data:image/svg+xml"), "{page}");
    for code in &codes {
        let grouped: Vec<&str> = (0..code.len())
            .step_by(4)
            .map(|i| &code[i..i + 4])
            .collect();
        assert!(!page.contains(code.as_str()), "{page}");
        assert!(!page.contains(&grouped.join(" ")), "{page}");
    }
}

#[sqlx::test]
async fn ticket_codes_are_unique_across_orders(pool: PgPool) {
    let fixture = published_event(
        &pool,
        &[TicketSpec::new(50, 4, 4), TicketSpec::new(50, 4, 4)],
    )
    .await;
    let app = TestApp::spawn(pool.clone()).await;
    let mut all = Vec::new();
    for i in 0..8 {
        let tt = fixture.ticket_type_ids[i % 2];
        let (order, secret) =
            api_buy_with_secret(&app, tt, 1 + (i as i64 % 4), &format!("b{i}@example.org")).await;
        let shown: Vec<String> = tickets_on_page(&order_page(&app, order, &secret).await)
            .into_iter()
            .map(|(code, _)| code)
            .collect();
        assert_eq!(shown.len(), 1 + i % 4);
        assert_eq!(shown, ticket_codes(&pool, order).await);
        all.extend(shown);
    }
    let distinct: BTreeSet<&String> = all.iter().collect();
    assert_eq!(distinct.len(), all.len(), "a code repeats: {all:?}");
    let (rows, codes): (i64, i64) =
        sqlx::query_as("SELECT count(*), count(DISTINCT code) FROM tickets")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((rows, codes), (all.len() as i64, all.len() as i64));

    // The schema refuses a second ticket with a code already in use.
    let order: Uuid = sqlx::query_scalar("SELECT id FROM orders LIMIT 1")
        .fetch_one(&pool)
        .await
        .unwrap();
    let err = sqlx::query("INSERT INTO tickets (order_id, position, code) VALUES ($1, 99, $2)")
        .bind(order)
        .bind(&all[0])
        .execute(&pool)
        .await
        .expect_err("a duplicate ticket code was stored");
    assert_eq!(
        err.as_database_error().and_then(|e| e.constraint()),
        Some("tickets_code_unique")
    );
}
