//! Stats from the orders table, and the own events list a page at a time.

use super::*;

#[sqlx::test]
async fn stats_are_the_sums_of_the_orders_table(pool: PgPool) {
    let app = TestApp::spawn_for_bursts(pool.clone()).await;
    let org = app.organizer("stats@example.org").await;
    let fixture = owned_published_event(
        &org,
        &[TicketSpec::new(50, 4, 4), TicketSpec::new(20, 4, 4)],
    )
    .await;
    let [a, b] = fixture.ticket_type_ids[..] else {
        unreachable!()
    };
    // A price change after some sales: revenue counts each order's own price.
    for i in 0..5 {
        api_buy(&app, a, 1 + i % 3, &format!("a{i}@example.org")).await;
    }
    let event = event_path(&fixture);
    ok_json(
        send(
            &org,
            Method::PATCH,
            &format!("{event}/ticket-types/{a}"),
            Some(&json!({"price_minor": 3000})),
        )
        .await,
    )
    .await;
    api_buy(&app, a, 2, "late@example.org").await;
    let gone = api_buy(&app, b, 4, "gone@example.org").await;
    api_buy(&app, b, 1, "kept@example.org").await;
    ok_json(
        send(
            &org,
            Method::POST,
            &format!("/api/v1/organizer/orders/{gone}/cancel"),
            None,
        )
        .await,
    )
    .await;

    let stats = ok_json(send(&org, Method::GET, &format!("{event}/stats"), None).await).await;
    let from_table: HashMap<Uuid, (i64, i64, i32, i32)> = sqlx::query_as::<_, (Uuid, i64, i64, i32, i32)>(
        "SELECT t.id,
                COALESCE(SUM(o.quantity) FILTER (WHERE o.status = 'confirmed'), 0)::int8,
                COALESCE(SUM(o.quantity::int8 * o.unit_price_minor) FILTER (WHERE o.status = 'confirmed'), 0)::int8,
                t.capacity, t.remaining
         FROM ticket_types t LEFT JOIN orders o ON o.ticket_type_id = t.id
         WHERE t.event_id = $1 GROUP BY t.id",
    )
    .bind(fixture.event_id)
    .fetch_all(&pool)
    .await
    .unwrap()
    .into_iter()
    .map(|(id, sold, revenue, capacity, remaining)| (id, (sold, revenue, capacity, remaining)))
    .collect();
    let mut total_sold = 0;
    let mut total_revenue = 0;
    for row in stats["ticket_types"].as_array().unwrap() {
        let id = Uuid::parse_str(row["id"].as_str().unwrap()).unwrap();
        let (sold, revenue, capacity, remaining) = from_table[&id];
        assert_eq!(row["sold"], sold, "{row}");
        assert_eq!(row["capacity"], capacity);
        assert_eq!(row["remaining"], remaining);
        assert_eq!(i64::from(capacity) - i64::from(remaining), sold);
        let revenue_sent: i64 = row["revenue"]
            .as_array()
            .unwrap()
            .iter()
            .inspect(|r| assert_eq!(r["currency"], "EUR"))
            .map(|r| r["amount_minor"].as_i64().unwrap())
            .sum();
        assert_eq!(revenue_sent, revenue, "{row}");
        total_sold += sold;
        total_revenue += revenue;
    }
    assert_eq!(stats["totals"]["sold"], total_sold);
    assert_eq!(
        stats["totals"]["revenue"],
        json!([{"currency": "EUR", "amount_minor": total_revenue}])
    );
    assert_eq!(from_table[&b].0, 1, "the cancelled order is not counted");

    // Per minute around now (the app's clock stands still in tests, so the
    // default range, the hour before it, would miss these sales): the same
    // tickets, every minute present.
    let rfc = |t: time::OffsetDateTime| {
        let text = t
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap();
        form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>()
    };
    let range = format!(
        "from={}&to={}",
        rfc(now() - time::Duration::minutes(30)),
        rfc(now() + time::Duration::minutes(30))
    );
    let series = ok_json(
        send(
            &org,
            Method::GET,
            &format!("{event}/stats/sales?{range}"),
            None,
        )
        .await,
    )
    .await;
    let minutes = series["minutes"].as_array().unwrap();
    assert!((60..=61).contains(&minutes.len()), "{}", minutes.len());
    let per_minute: i64 = minutes.iter().map(|m| m["tickets"].as_i64().unwrap()).sum();
    assert_eq!(per_minute, total_sold);
    // A range before the sales holds none.
    let earlier = ok_json(
        send(
            &org,
            Method::GET,
            &format!("{event}/stats/sales?from=2020-01-01T00:00:00Z&to=2020-01-01T00:10:00Z"),
            None,
        )
        .await,
    )
    .await;
    let minutes = earlier["minutes"].as_array().unwrap();
    assert_eq!(minutes.len(), 10);
    assert_eq!(minutes[3]["at"], "2020-01-01T00:03:00Z");
    assert!(minutes.iter().all(|m| m["tickets"] == 0));
}

#[sqlx::test]
async fn the_own_events_list_comes_a_page_at_a_time(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("pages@example.org").await;
    let other = app.organizer("elsewhere@example.org").await;
    let mut mine = BTreeSet::new();
    for _ in 0..5 {
        mine.insert(
            owned_published_event(&org, &[TicketSpec::new(5, 1, 1)])
                .await
                .event_id,
        );
    }
    owned_published_event(&other, &[TicketSpec::new(5, 1, 1)]).await;
    let mut seen = Vec::new();
    let mut after = String::new();
    let mut pages = 0;
    loop {
        let path = format!("/api/v1/organizer/events?limit=2&after={after}");
        let page = ok_json(send(&org, Method::GET, &path, None).await).await;
        pages += 1;
        for event in page["events"].as_array().unwrap() {
            seen.push(Uuid::parse_str(event["id"].as_str().unwrap()).unwrap());
        }
        match page["next"].as_str() {
            Some(next) => after = next.to_owned(),
            None => break,
        }
        assert!(pages < 10, "the walk did not end");
    }
    assert_eq!(pages, 3);
    assert_eq!(seen.len(), 5, "an event came twice");
    assert_eq!(seen.into_iter().collect::<BTreeSet<_>>(), mine);
    for (query, field) in [
        ("limit=0", "limit"),
        ("after=junk", "after"),
        ("sort=id", "sort"),
    ] {
        let resp = send(
            &org,
            Method::GET,
            &format!("/api/v1/organizer/events?{query}"),
            None,
        )
        .await;
        assert_invalid(resp, field).await;
    }
}
