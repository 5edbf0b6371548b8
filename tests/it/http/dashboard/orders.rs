//! The order list: search, pages, rows.

use super::*;

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
