//! Orders: cursor pages, incremental sync, the cancel that returns tickets once.

use super::*;

/// Orders of the event through the API, page by page.
async fn walk(
    org: &Organizer,
    fixture: &Fixture,
    query: &str,
    mut between: impl AsyncFnMut(),
) -> Vec<Value> {
    let mut orders = Vec::new();
    let mut after = String::new();
    for _ in 0..1000 {
        let path = format!("{}/orders?{query}&after={after}", event_path(fixture));
        let page = ok_json(send(org, Method::GET, &path, None).await).await;
        orders.extend(page["orders"].as_array().unwrap().iter().cloned());
        between().await;
        match page["next"].as_str() {
            Some(next) => after = next.to_owned(),
            None => return orders,
        }
    }
    panic!("the walk did not end");
}

#[sqlx::test]
async fn cursor_pages_return_every_order_once_while_purchases_go_on(pool: PgPool) {
    let app = TestApp::spawn_for_bursts(pool.clone()).await;
    let org = app.organizer("walk@example.org").await;
    let fixture = owned_published_event(
        &org,
        &[TicketSpec::new(1000, 4, 4), TicketSpec::new(1000, 4, 4)],
    )
    .await;
    for i in 0..40 {
        let tt = fixture.ticket_type_ids[i % 2];
        api_buy(&app, tt, 1, &format!("early{i}@example.org")).await;
    }
    let before = confirmed_order_ids(&pool).await;
    let mut round = 0;
    let orders = walk(&org, &fixture, "limit=7", async || {
        // Concurrent purchases while the walk goes on.
        round += 1;
        let buys = (0..3).map(|i| {
            let tt = fixture.ticket_type_ids[i % 2];
            api_buy_later(&app, tt, format!("late{round}-{i}@example.org"))
        });
        futures::future::join_all(buys).await;
    })
    .await;
    let ids: Vec<Uuid> = orders
        .iter()
        .map(|o| Uuid::parse_str(o["id"].as_str().unwrap()).unwrap())
        .collect();
    let unique: BTreeSet<Uuid> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "an order came twice");
    assert!(
        unique.is_superset(&before),
        "an order that existed was skipped"
    );
    // What the walk returned exists, and in (updated_at, id) order.
    let keys: Vec<(String, String)> = orders
        .iter()
        .map(|o| {
            (
                o["updated_at"].as_str().unwrap().to_owned(),
                o["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(keys.len() >= 40);
    assert!(unique.is_subset(&confirmed_order_ids(&pool).await));
}

async fn api_buy_later(app: &TestApp, tt: Uuid, email: String) {
    api_buy(app, tt, 1, &email).await;
}

#[sqlx::test]
async fn modified_since_returns_an_order_cancelled_after_the_sync(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("sync@example.org").await;
    let fixture = owned_published_event(&org, &[TicketSpec::new(100, 4, 4)]).await;
    let tt = fixture.ticket_type_id();
    let first = api_buy(&app, tt, 1, "a@example.org").await;
    api_buy(&app, tt, 2, "b@example.org").await;
    let last = api_buy(&app, tt, 1, "c@example.org").await;
    let synced = walk(&org, &fixture, "limit=2", async || {}).await;
    assert_eq!(synced.len(), 3);
    let sync_point = synced.last().unwrap()["updated_at"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(synced.last().unwrap()["id"], last.to_string());

    let cancelled = ok_json(
        send(
            &org,
            Method::POST,
            &format!("/api/v1/organizer/orders/{first}/cancel"),
            None,
        )
        .await,
    )
    .await;
    assert_eq!(cancelled["status"], "cancelled");
    let since = form_urlencoded::byte_serialize(sync_point.as_bytes()).collect::<String>();
    let changed = walk(
        &org,
        &fixture,
        &format!("modified_since={since}"),
        async || {},
    )
    .await;
    let ids: Vec<&str> = changed.iter().map(|o| o["id"].as_str().unwrap()).collect();
    // The order at the sync point itself (`>=`), then the cancelled one.
    assert_eq!(ids, [last.to_string(), first.to_string()]);
    assert_eq!(changed[1]["status"], "cancelled");
    assert!(changed[1]["cancelled_at"].is_string());
    // Filters: by status and by email (the dashboard's search).
    let only_cancelled = walk(&org, &fixture, "status=cancelled", async || {}).await;
    assert_eq!(only_cancelled.len(), 1);
    let by_email = walk(&org, &fixture, "email=B%40EXAMPLE", async || {}).await;
    assert_eq!(by_email.len(), 1);
    assert_eq!(by_email[0]["quantity"], 2);
    assert_eq!(by_email[0]["total_minor"], 5000);
    assert_eq!(by_email[0]["currency"], "EUR");
}

#[sqlx::test]
async fn two_concurrent_cancels_return_the_tickets_once(pool: PgPool) {
    let app = TestApp::spawn_for_bursts(pool.clone()).await;
    let org = app.organizer("cancel@example.org").await;
    let fixture = owned_published_event(&org, &[TicketSpec::new(1000, 4, 4)]).await;
    let tt = fixture.ticket_type_id();
    for round in 0..15 {
        let order = api_buy(&app, tt, 3, &format!("buyer{round}@example.org")).await;
        let path = format!("/api/v1/organizer/orders/{order}/cancel");
        let (a, b) = tokio::join!(
            send(&org, Method::POST, &path, None),
            send(&org, Method::POST, &path, None)
        );
        let mut statuses = [a.status(), b.status()];
        statuses.sort();
        assert_eq!(
            statuses,
            [StatusCode::OK, StatusCode::CONFLICT],
            "round {round}"
        );
        let loser = if a.status() == StatusCode::CONFLICT {
            a
        } else {
            b
        };
        assert_api_error(loser, StatusCode::CONFLICT, "already_cancelled", None).await;
        assert_eq!(order_status(&pool, order).await, "cancelled");
        // The stock from the table: every ticket back, once.
        assert_eq!(capacity_and_remaining(&pool, tt).await, (1000, 1000));
    }
    assert_invariants(&pool).await;
}
